/* Test program for the shim (tests/test_shim_mpi.py): hand-written probes and PSG tables, the way
 * the compile wrapper would generate them, around known communication patterns.
 *   usage: patterns PX PY ITERS BURN_A BURN_B [late|exit|abort|hang|hang1]
 * late: rank 1 sleeps 0.3 s before the ring; exit: leave without MPI_Finalize; hang: every rank waits to be killed; hang1: ranks > 0 do.
 * Vertices (pre-order):      main template locals:      burn template locals:
 *   0 main                    0 FUNCTION                  0 FUNCTION
 *   1 CALL burn (site A)      1 CALL A                    1 LOOP
 *   2   burn      3   loop    2 CALL B
 *   4 CALL burn (site B)      3..16 -> vertices 7..20
 *   5   burn      6   loop
 *   7 Init  8 ring Send  9 ring Recv  10 halo Irecv  11 halo Isend  12 halo Waitall
 *   13 wildcard Recv (rank 0)  14 worker Send  15 Comm_split  16 Allreduce(sub)
 *   17 Barrier  18 Finalize  19 persistent Startall  20 persistent Waitall
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "scalgraph.h"

uint32_t __sg_fid_t_main = 0xFFFFFFFFu, __sg_fid_t_burn = 0xFFFFFFFFu;
static const uint32_t inst_base[] = {0, 17, 19};
static const uint32_t inst_func[] = {0, 1, 1};
static const uint32_t inst_vid[] = {0, 1, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                    2, 3, 5, 6};
static const int32_t inst_callee[] = {-1, 1, 2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                      -1, -1, -1, -1};
static const uint32_t func_default_inst[] = {0, 1};
static uint32_t *const fid_slots[] = {&__sg_fid_t_main, &__sg_fid_t_burn};
static const uint8_t vertex_kind[21] = {0};
static const struct sg_psg_tables tables = {"0123456789abcdef", 21, 2, 3, inst_base, inst_func, inst_vid,
                                            inst_callee, func_default_inst, fid_slots, vertex_kind};
__attribute__((constructor)) static void register_tables(void) { sg_register_psg(&tables); }

enum { L_CALL_A = 1, L_CALL_B = 2, L_INIT = 3, L_SEND = 4, L_RECV = 5, L_IRECV = 6, L_ISEND = 7,
       L_WAITALL = 8, L_WILD = 9, L_WORKER = 10, L_SPLIT = 11, L_ALLRED = 12, L_BARRIER = 13,
       L_FINALIZE = 14, L_START = 15, L_PWAIT = 16 };

static volatile double sink;

static void burn(long n) {
    sg_fn_enter(__sg_fid_t_burn);
    sg_cur = 1;
    double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)(i % 7) * 0.5;
    sink = x;
    sg_fn_exit();
}

int main(int argc, char **argv) {
    sg_fn_enter(__sg_fid_t_main);
    if (argc < 6)
        return 2;
    int px = atoi(argv[1]), py = atoi(argv[2]), iters = atoi(argv[3]);
    long burn_a = atol(argv[4]), burn_b = atol(argv[5]);
    const char *mode = argc > 6 ? argv[6] : "";
    int rank, size;
    sg_cur = L_INIT;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long checksum = 0;

    sg_cur = L_CALL_A;
    burn(burn_a);
    sg_cur = L_CALL_B;
    burn(burn_b);

    if (strcmp(mode, "late") == 0) {
        sg_cur = L_BARRIER;
        MPI_Barrier(MPI_COMM_WORLD);   /* start together, then */
        if (rank == 1)
            usleep(300000);            /* rank 0 waits for rank 1 in the ring's first receive */
    }

    /* ring: 100 ints to the right, from the left; even ranks send first (not alone: a blocking
     * send to oneself may never return) */
    int out[100], in[100];
    for (int it = 0; it < iters && size > 1; it++) {
        for (int i = 0; i < 100; i++)
            out[i] = rank * 1000 + it + i;
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        for (int phase = 0; phase < 2; phase++) {
            if ((phase == 0) == (rank % 2 == 0)) {
                sg_cur = L_SEND;
                MPI_Send(out, 100, MPI_INT, right, 7, MPI_COMM_WORLD);
            } else {
                sg_cur = L_RECV;
                MPI_Recv(in, 100, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int i = 0; i < 100; i++)
                    checksum += in[i];
            }
        }
    }

    /* 2-D periodic halo on a PX x PY grid: 50 doubles per direction, tag = direction */
    int x = rank % px, y = rank / px;
    int nb[4] = {y * px + (x + 1) % px, y * px + (x + px - 1) % px, ((y + 1) % py) * px + x,
                 ((y + py - 1) % py) * px + x};   /* right, left, up, down */
    const int opposite[4] = {1, 0, 3, 2};
    double hs[4][50], hr[4][50];
    for (int it = 0; it < iters; it++) {
        MPI_Request reqs[8];
        for (int d = 0; d < 4; d++) {
            for (int i = 0; i < 50; i++)
                hs[d][i] = rank + 0.25 * d + it;
            sg_cur = L_IRECV;   /* receive what the neighbour on side d sent towards us */
            MPI_Irecv(hr[d], 50, MPI_DOUBLE, nb[d], opposite[d], MPI_COMM_WORLD, &reqs[d]);
        }
        for (int d = 0; d < 4; d++) {
            sg_cur = L_ISEND;
            MPI_Isend(hs[d], 50, MPI_DOUBLE, nb[d], d, MPI_COMM_WORLD, &reqs[4 + d]);
        }
        sg_cur = L_WAITALL;
        MPI_Waitall(8, reqs, MPI_STATUSES_IGNORE);
        for (int d = 0; d < 4; d++)
            checksum += (long)hr[d][0];
    }

    /* master-worker with wildcard receives: each worker sends 3 messages of 10 ints, tag 100+rank */
    int msg[10];
    if (rank == 0) {
        for (int i = 0; i < 3 * (size - 1); i++) {
            sg_cur = L_WILD;
            MPI_Recv(msg, 10, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            checksum += msg[0];
        }
    } else {
        for (int i = 0; i < 3; i++) {
            for (int k = 0; k < 10; k++)
                msg[k] = rank + i;
            sg_cur = L_WORKER;
            MPI_Send(msg, 10, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
        }
    }

    /* collective on a sub-communicator: even and odd ranks */
    MPI_Comm sub;
    sg_cur = L_SPLIT;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub);
    for (int it = 0; it < iters; it++) {
        long mine = rank + it, total = 0;
        sg_cur = L_ALLRED;
        MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, sub);
        checksum += total;
    }

    /* persistent requests: ring again, with Send_init/Recv_init, Startall and Waitall */
    MPI_Request preq[2];
    int pout = rank, pin = -1;
    sg_cur = L_START;
    MPI_Send_init(&pout, 1, MPI_INT, (rank + 1) % size, 9, MPI_COMM_WORLD, &preq[0]);
    MPI_Recv_init(&pin, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &preq[1]);
    for (int it = 0; it < iters; it++) {
        sg_cur = L_START;
        MPI_Startall(2, preq);
        sg_cur = L_PWAIT;
        MPI_Waitall(2, preq, MPI_STATUSES_IGNORE);
        checksum += pin;
    }
    sg_cur = L_START;
    MPI_Request_free(&preq[0]);
    MPI_Request_free(&preq[1]);

    sg_cur = L_BARRIER;
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d checksum %ld\n", rank, checksum);
    fflush(stdout);
    if (strcmp(mode, "exit") == 0)
        exit(0);   /* no MPI_Finalize: the file is written at exit */
    if (strcmp(mode, "abort") == 0 && rank == 1) {
        sg_cur = L_FINALIZE;
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (strcmp(mode, "hang") == 0 || (strcmp(mode, "hang1") == 0 && rank > 0)) {
        printf("pid %d %ld\n", rank, (long)getpid());
        fflush(stdout);
        pause();   /* killed by the test */
    }
    sg_cur = L_SPLIT;
    MPI_Comm_free(&sub);
    sg_cur = L_FINALIZE;
    MPI_Finalize();
    sg_fn_exit();
    return 0;
}
