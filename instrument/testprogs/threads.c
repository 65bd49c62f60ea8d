/* Test program for the shim under MPI_THREAD_MULTIPLE (tests/test_shim_mpi.py): two threads per rank
 * call MPI concurrently from two different functions; each thread has its own calling context.
 * After the threads, each rank forks a child that points SCALGRAPH_OUT at CHILD_DIR and exits: the
 * child must not write a profile (it is not the process that owns the file).
 *   usage: threads N CHILD_DIR          (2 ranks)
 * Vertices: 0 main, 1 Init_thread, 2 Finalize, 3 Barrier, 4 thread_a, 5 its Sendrecv,
 *           6 thread_b, 7 its Sendrecv */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "scalgraph.h"

uint32_t __sg_fid_th_main = 0xFFFFFFFFu, __sg_fid_th_a = 0xFFFFFFFFu, __sg_fid_th_b = 0xFFFFFFFFu;
static const uint32_t inst_base[] = {0, 4, 6};
static const uint32_t inst_func[] = {0, 1, 2};
static const uint32_t inst_vid[] = {0, 1, 2, 3, 4, 5, 6, 7};
static const int32_t inst_callee[] = {-1, -1, -1, -1, -1, -1, -1, -1};
static const uint32_t func_default_inst[] = {0, 1, 2};
static uint32_t *const fid_slots[] = {&__sg_fid_th_main, &__sg_fid_th_a, &__sg_fid_th_b};
static const uint8_t vertex_kind[8] = {0};
static const struct sg_psg_tables tables = {"threads000000000", 8, 3, 3, inst_base, inst_func, inst_vid,
                                            inst_callee, func_default_inst, fid_slots, vertex_kind};
__attribute__((constructor)) static void register_tables(void) { sg_register_psg(&tables); }

static int n_iters, peer;
static long sums[3];

static void exchange(int tag) {
    for (int i = 0; i < n_iters; i++) {
        int x = i * tag, y = 0;
        sg_cur = 1;
        MPI_Sendrecv(&x, 1, MPI_INT, peer, tag, &y, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        sums[tag] += y;
    }
}

static void *thread_a(void *arg) {
    (void)arg;
    sg_fn_enter(__sg_fid_th_a);
    exchange(1);
    sg_fn_exit();
    return NULL;
}

static void *thread_b(void *arg) {
    (void)arg;
    sg_fn_enter(__sg_fid_th_b);
    exchange(2);
    sg_fn_exit();
    return NULL;
}

int main(int argc, char **argv) {
    sg_fn_enter(__sg_fid_th_main);
    n_iters = argc > 1 ? atoi(argv[1]) : 100;
    int provided, rank;
    sg_cur = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_MULTIPLE) {
        printf("no MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    peer = 1 - rank;
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pid_t child = fork();
    if (child == 0) {
        if (argc > 2)
            setenv("SCALGRAPH_OUT", argv[2], 1);
        exit(0);
    }
    waitpid(child, NULL, 0);
    sg_cur = 3;
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d sums %ld %ld\n", rank, sums[1], sums[2]);
    sg_cur = 2;
    MPI_Finalize();
    sg_fn_exit();
    return 0;
}
