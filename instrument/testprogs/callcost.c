/* Cost per call (benchmarks/bench_shim_overhead.py): one rank times tight loops of
 *   a probe pair (sg_fn_enter/sg_fn_exit), MPI_Iprobe, and a self exchange Irecv+Isend+Waitall,
 * and prints nanoseconds per iteration.  Built once with the shim and once with empty probes.
 * usage: callcost [iterations] [spin]: with spin > 0 it also prints the thread CPU time of `spin`
 * additions (no calls); run at SCALGRAPH_HZ=0 and at a high rate, the difference per sample is
 * what one sample costs (signal delivery, handler, re-arming). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "scalgraph.h"

uint32_t __sg_fid_cc_main = 0xFFFFFFFFu, __sg_fid_cc_leaf = 0xFFFFFFFFu;
static const uint32_t inst_base[] = {0, 4};
static const uint32_t inst_func[] = {0, 1};
static const uint32_t inst_vid[] = {0, 1, 2, 3, 4};
static const int32_t inst_callee[] = {-1, 1, -1, -1, -1};
static const uint32_t func_default_inst[] = {0, 1};
static uint32_t *const fid_slots[] = {&__sg_fid_cc_main, &__sg_fid_cc_leaf};
static const uint8_t vertex_kind[5] = {0};
static const struct sg_psg_tables tables = {"callcost00000000", 5, 2, 2, inst_base, inst_func, inst_vid,
                                            inst_callee, func_default_inst, fid_slots, vertex_kind};
__attribute__((constructor)) static void register_tables(void) { sg_register_psg(&tables); }

static volatile long leaf_sink;
__attribute__((noinline)) static void leaf(long i) {
    sg_fn_enter(__sg_fid_cc_leaf);
    leaf_sink += i;
    sg_fn_exit();
}

static double thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    sg_fn_enter(__sg_fid_cc_main);
    long n = argc > 1 ? atol(argv[1]) : 200000;
    long spin = argc > 2 ? atol(argv[2]) : 0;
    sg_cur = 2;
    MPI_Init(&argc, &argv);
    double t0 = MPI_Wtime();
    for (long i = 0; i < 50 * n; i++) {
        sg_cur = 1;
        leaf(i);
    }
    double t1 = MPI_Wtime();
    int flag;
    for (long i = 0; i < n; i++) {
        sg_cur = 2;
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    double t2 = MPI_Wtime();
    int a = 1, b = 0;
    MPI_Request r[2];
    for (long i = 0; i < n; i++) {
        sg_cur = 3;
        MPI_Irecv(&b, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &r[0]);
        MPI_Isend(&a, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    double t3 = MPI_Wtime();
    printf("probe_pair_ns %.1f iprobe_ns %.1f exchange_ns %.1f", 1e9 * (t1 - t0) / (50.0 * n),
           1e9 * (t2 - t1) / n, 1e9 * (t3 - t2) / n);
    if (spin > 0) {
        sg_cur = 2;
        double c0 = thread_cpu_ns();
        volatile double acc = 0;   /* a store per iteration: the loop is not folded away */
        for (long i = 0; i < spin; i++)
            acc += (double)(i & 7);
        printf(" spin_cpu_ns %.0f", thread_cpu_ns() - c0);
    }
    printf("\n");
    sg_cur = 4;
    MPI_Finalize();
    sg_fn_exit();
    return 0;
}
