/* hybrid_imbalance: MPI + OpenMP, thread imbalance in a parallel loop on one rank.
 *
 * A relaxation over GLOBAL_ROWS cells, rows split evenly over the ranks (strong scaling) and each
 * rank's rows over its OpenMP threads (`parallel for`, static schedule: thread t gets the t-th
 * contiguous block).  On rank size/2 the last HOT_ROWS rows are hot: each runs HOT_STEPS extra
 * sub-steps.  They all fall in the last thread's block, so that thread works long while the others
 * idle at the loop's implicit barrier; the hot work does not shrink with the rank count, so the
 * neighbours wait for that rank in the halo exchange (MPI_Sendrecv) and everybody in the
 * MPI_Allreduce.  Root cause: the sub-step loop of the hot rows.
 *
 * Integer arithmetic only: the printed checksum depends on the rank count and the iterations, not on
 * the thread count or on how OpenMP combines the reduction.
 * usage: OMP_NUM_THREADS=2 mpiexec -n 4 hybrid_imbalance [iterations]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define GLOBAL_ROWS 2400000L
#define HOT_ROWS 3000L          /* on rank size/2, at the end of its rows */
#define HOT_STEPS 1500L         /* extra sub-steps per hot row per iteration, independent of size */
#define MOD 1000003L

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 20;
    long n = GLOBAL_ROWS / size, first = rank * n;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    long hot_from = rank == size / 2 && !getenv("SAMPLE_FIXED") ? n - HOT_ROWS : n;  /* SAMPLE_FIXED=1: fixed */
    long *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    for (long i = 0; i < n; i++)
        a[i] = (first + i) % 97;
    long check = 0;

    for (int it = 0; it < iterations; it++) {
        long halo[2] = {0, 0}, local = 0, global;
        MPI_Sendrecv(&a[0], 1, MPI_LONG, left, 0, &halo[1], 1, MPI_LONG, right, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&a[n - 1], 1, MPI_LONG, right, 1, &halo[0], 1, MPI_LONG, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
#pragma omp parallel for schedule(static) reduction(+ : local)
        for (long i = 0; i < n; i++) {
            long l = i > 0 ? a[i - 1] : halo[0], r = i < n - 1 ? a[i + 1] : halo[1];
            long v = (l + 2 * a[i] + r + it) % MOD;
            if (i >= hot_from)
                for (long s = 0; s < HOT_STEPS; s++)
                    v = (v * 31 + s) % MOD;
            b[i] = v;
            local += v & 15;
        }
        long *t = a; a = b; b = t;
        MPI_Allreduce(&local, &global, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        check = (check + global) % MOD;
    }
    if (rank == 0)
        printf("hybrid_imbalance: %d ranks, %d iterations, checksum %ld\n", size, iterations, check);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
