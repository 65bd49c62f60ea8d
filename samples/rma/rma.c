/* One-sided halo exchange on a ring, twice per iteration: once with MPI_Win_fence, once with
 * general active target synchronisation (post/start/complete/wait).  Rank size/2 does extra work
 * right before its MPI_Win_post (delay_post), so its left neighbour, the only origin that accesses
 * it, waits for the post: Scalasca's Late Post, planted at delay_post's loop.  Prints one line with
 * a deterministic checksum.  Usage: rma [iterations]   (default 20) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096              /* doubles per rank */
#define LATE_WORK 6000000   /* about 30 ms of CPU per iteration (measured, -O2) */

static double relax(double *u, int n)
{
    double s = 0.0;
    for (int i = 1; i < n - 1; i++) {
        u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
        s += u[i];
    }
    return s;
}

static double delay_post(long work, double seed)
{
    double x = seed;
    for (long i = 0; i < work; i++)
        x = x * 0.999999 + 1e-6;
    return x;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    int left = (rank + size - 1) % size, right = (rank + 1) % size, late = size / 2;

    double *u = calloc(N, sizeof(double));
    double halo[2] = {0.0, 0.0};            /* window: [0] from the fence put, [1] from the GATS put */
    for (int i = 0; i < N; i++)
        u[i] = (double)((rank * N + i) % 97) / 97.0;
    MPI_Win win;
    MPI_Win_create(halo, sizeof halo, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Group world, left_g, right_g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &left_g);
    MPI_Group_incl(world, 1, &right, &right_g);

    double check = 0.0, extra = 0.0;
    for (int it = 0; it < iters; it++) {
        /* fence exchange: my last value into my right neighbour's halo[0] */
        MPI_Win_fence(0, win);
        MPI_Put(&u[N - 1], 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, win);
        MPI_Win_fence(0, win);
        u[0] = halo[0];
        check += relax(u, N);

        /* GATS exchange: expose halo to the left neighbour, write my last value into the right one's */
        if (rank == late && !getenv("SAMPLE_FIXED"))   /* SAMPLE_FIXED=1: the fixed program */
            extra += delay_post(LATE_WORK, u[N / 2]);
        MPI_Win_post(left_g, 0, win);
        MPI_Win_start(right_g, 0, win);
        MPI_Put(&u[N - 2], 1, MPI_DOUBLE, right, 1, 1, MPI_DOUBLE, win);
        MPI_Win_complete(win);
        MPI_Win_wait(win);
        u[0] = 0.5 * (u[0] + halo[1]);
        check += relax(u, N);
    }

    double local = check + extra, total = 0.0;      /* extra keeps the planted work alive */
    MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("rma: %d ranks, %d iterations, checksum %.6f\n", size, iters, total);
    MPI_Group_free(&left_g);
    MPI_Group_free(&right_g);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    free(u);
    MPI_Finalize();
    return 0;
}
