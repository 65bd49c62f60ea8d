/* Test program for the shim's MPI coverage (tests/test_shim_coverage.py), 4 ranks: every call sits at
 * its own vertex (vertex id = main's local index = the number in AT()), so per-vertex counts and
 * dependences can be checked call by call.  Prints a checksum that must not change with the shim. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "scalgraph.h"

enum { NV = 64 };
uint32_t __sg_fid_cov_main = 0xFFFFFFFFu;
static const uint32_t inst_base[] = {0};
static const uint32_t inst_func[] = {0};
static uint32_t inst_vid[NV];
static int32_t inst_callee[NV];
static const uint32_t func_default_inst[] = {0};
static uint32_t *const fid_slots[] = {&__sg_fid_cov_main};
static const uint8_t vertex_kind[NV] = {0};
static struct sg_psg_tables tables = {"coverage00000000", NV, 1, 1, inst_base, inst_func, inst_vid,
                                      inst_callee, func_default_inst, fid_slots, vertex_kind};
__attribute__((constructor)) static void register_tables(void) {
    for (int i = 0; i < NV; i++) {
        inst_vid[i] = (uint32_t)i;
        inst_callee[i] = -1;
    }
    sg_register_psg(&tables);
}

#define AT(k) (sg_cur = (k))

int main(int argc, char **argv) {
    sg_fn_enter(__sg_fid_cov_main);
    int rank, size;
    AT(1); MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4)
        MPI_Abort(MPI_COMM_WORLD, 2);
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long sum = 0, x = rank + 1, y = 0, all[4] = {0}, two[8] = {0};
    int ones[4] = {1, 1, 1, 1}, disp[4] = {0, 1, 2, 3}, bytes8[4] = {8, 8, 8, 8}, bdisp[4] = {0, 8, 16, 24};
    MPI_Datatype longs[4] = {MPI_LONG, MPI_LONG, MPI_LONG, MPI_LONG};
    int buf[4] = {rank, rank, rank, rank};

    /* blocking collectives */
    AT(2); MPI_Bcast(buf, 4, MPI_INT, 0, MPI_COMM_WORLD);
    AT(3); MPI_Reduce(&x, &y, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    sum += y;
    AT(4); MPI_Gather(&x, 1, MPI_LONG, all, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    AT(5); MPI_Gatherv(&x, 1, MPI_LONG, all, ones, disp, MPI_LONG, 0, MPI_COMM_WORLD);
    AT(6); MPI_Scatter(all, 1, MPI_LONG, &y, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    sum += y;
    AT(7); MPI_Scatterv(all, ones, disp, MPI_LONG, &y, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    AT(8); MPI_Allgather(&x, 1, MPI_LONG, all, 1, MPI_LONG, MPI_COMM_WORLD);
    AT(9); MPI_Allgatherv(&x, 1, MPI_LONG, all, ones, disp, MPI_LONG, MPI_COMM_WORLD);
    for (int i = 0; i < 4; i++)
        sum += all[i] * (i + 1);
    long sendv[4] = {x, 2 * x, 3 * x, 4 * x};
    AT(10); MPI_Alltoall(sendv, 1, MPI_LONG, all, 1, MPI_LONG, MPI_COMM_WORLD);
    AT(11); MPI_Alltoallv(sendv, ones, disp, MPI_LONG, all, ones, disp, MPI_LONG, MPI_COMM_WORLD);
    AT(12); MPI_Alltoallw(sendv, ones, bdisp, longs, all, ones, bdisp, longs, MPI_COMM_WORLD);
    for (int i = 0; i < 4; i++)
        sum += all[i];
    AT(13); MPI_Reduce_scatter(sendv, &y, ones, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    AT(14); MPI_Reduce_scatter_block(sendv, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    AT(15); MPI_Scan(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    sum += y;
    y = 0;
    AT(16); MPI_Exscan(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    sum += rank ? y : 0;
    (void)bytes8;

    /* non-blocking collectives, completed by Wait, Waitany and Waitall */
    MPI_Request r[4];
    AT(17); MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
    AT(18); MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    AT(19); MPI_Iallreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &r[0]);
    int idx;
    AT(20); MPI_Waitany(1, r, &idx, MPI_STATUS_IGNORE);
    sum += y;
    AT(21); MPI_Ibcast(buf, 4, MPI_INT, 1, MPI_COMM_WORLD, &r[0]);
    AT(22); MPI_Ialltoall(sendv, 1, MPI_LONG, two, 1, MPI_LONG, MPI_COMM_WORLD, &r[1]);
    AT(23); MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    sum += two[0] + two[3];

    /* point-to-point variants */
    long v = rank;
    AT(24); MPI_Sendrecv_replace(&v, 1, MPI_LONG, right, 5, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    sum += v;
    long in = -1, out = rank * 10;
    AT(25); MPI_Issend(&out, 1, MPI_LONG, right, 6, MPI_COMM_WORLD, &r[0]);
    AT(26); MPI_Irecv(&in, 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[1]);
    for (int k = 0; k < 2; k++) {
        AT(27); MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE);
    }
    sum += in;
    MPI_Status st;
    AT(28); MPI_Send(&out, 1, MPI_LONG, right, 7, MPI_COMM_WORLD);
    AT(29); MPI_Probe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
    AT(30); MPI_Recv(&in, 1, MPI_LONG, st.MPI_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    sum += in;
    /* Test* loops: how often they spin is not deterministic, what they complete is */
    int flag = 0, outcount = 0, idxs[2], done = 0;
    AT(31); MPI_Isend(&out, 1, MPI_LONG, right, 8, MPI_COMM_WORLD, &r[0]);
    AT(31); MPI_Irecv(&in, 1, MPI_LONG, left, 8, MPI_COMM_WORLD, &r[1]);
    while (!flag) {
        AT(32); MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
    }
    AT(33); MPI_Isend(&out, 1, MPI_LONG, right, 9, MPI_COMM_WORLD, &r[0]);
    AT(33); MPI_Irecv(&in, 1, MPI_LONG, left, 9, MPI_COMM_WORLD, &r[1]);
    for (done = 0; done < 2;) {
        AT(34); MPI_Testsome(2, r, &outcount, idxs, MPI_STATUSES_IGNORE);
        done += outcount == MPI_UNDEFINED ? 2 : outcount;
    }
    AT(35); MPI_Isend(&out, 1, MPI_LONG, right, 10, MPI_COMM_WORLD, &r[0]);
    AT(35); MPI_Irecv(&in, 1, MPI_LONG, left, 10, MPI_COMM_WORLD, &r[1]);
    for (done = 0; done < 2;) {
        flag = 0;
        AT(36); MPI_Testany(2, r, &idx, &flag, MPI_STATUS_IGNORE);
        done += flag && idx != MPI_UNDEFINED;
    }
    AT(37); MPI_Isend(&out, 1, MPI_LONG, right, 11, MPI_COMM_WORLD, &r[0]);
    AT(37); MPI_Irecv(&in, 1, MPI_LONG, left, 11, MPI_COMM_WORLD, &r[1]);
    for (done = 0; done < 2;) {
        AT(38); MPI_Waitsome(2, r, &outcount, idxs, MPI_STATUSES_IGNORE);
        done += outcount;
    }
    AT(39); MPI_Irecv(&in, 1, MPI_LONG, left, 12, MPI_COMM_WORLD, &r[1]);
    AT(39); MPI_Isend(&out, 1, MPI_LONG, right, 12, MPI_COMM_WORLD, &r[0]);
    AT(40); MPI_Request_free(&r[0]);   /* a freed send still goes out */
    flag = 0;
    while (!flag) {
        AT(41); MPI_Test(&r[1], &flag, MPI_STATUS_IGNORE);
    }
    sum += in;

    /* Cartesian communicators */
    MPI_Comm cart, row, dup;
    int dims[2] = {2, 2}, periods[2] = {1, 1}, remain[2] = {0, 1};
    AT(42); MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    AT(43); MPI_Cart_sub(cart, remain, &row);
    AT(44); MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, row);
    sum += 100 * y;
    AT(45); MPI_Comm_dup(row, &dup);
    AT(46); MPI_Barrier(dup);
    AT(47); MPI_Comm_free(&dup);

    /* one-sided */
    long window[4] = {0, 0, 0, 0}, got = 0, old = 0, one = 1;
    MPI_Win win;
    AT(48); MPI_Win_create(window, sizeof window, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    AT(49); MPI_Win_fence(0, win);
    AT(50); MPI_Put(&x, 1, MPI_LONG, right, 0, 1, MPI_LONG, win);
    AT(51); MPI_Accumulate(&x, 1, MPI_LONG, left, 1, 1, MPI_LONG, MPI_SUM, win);
    AT(49); MPI_Win_fence(0, win);
    AT(52); MPI_Get(&got, 1, MPI_LONG, left, 0, 1, MPI_LONG, win);
    AT(49); MPI_Win_fence(0, win);
    sum += got + window[0] + window[1];
    AT(53); MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    AT(54); MPI_Get_accumulate(&one, 1, MPI_LONG, &old, 1, MPI_LONG, right, 2, 1, MPI_LONG, MPI_SUM, win);
    AT(55); MPI_Win_unlock(right, win);
    AT(56); MPI_Win_free(&win);

    AT(57); MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d sum %ld\n", rank, sum);
    AT(58); MPI_Finalize();
    sg_fn_exit();
    return 0;
}
