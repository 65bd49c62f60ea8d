/* hybrid_master: MPI + OpenMP, a master-only serial section that leaves the other threads idle.
 *
 * A relaxation over GLOBAL_ROWS cells, rows split evenly over the ranks (strong scaling) and each
 * rank's rows over its OpenMP threads (`omp for`).  Every iteration, inside the parallel region, the
 * master thread of rank size/2 alone runs a bookkeeping pass of fixed size (`omp master`): the other
 * threads of that rank idle at the barrier after it, and since its cost does not shrink with the rank
 * count, the neighbours wait for that rank in the halo exchange (MPI_Sendrecv) and everybody in the
 * MPI_Allreduce.  Root cause: the loop in serial_bookkeeping.
 *
 * Integer arithmetic only: the printed checksum depends on the rank count and the iterations, not on
 * the thread count or on how OpenMP combines the reduction.
 * usage: OMP_NUM_THREADS=2 mpiexec -n 4 hybrid_master [iterations]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define GLOBAL_ROWS 2400000L
#define BOOKKEEPING 1500000L    /* operations per iteration on one thread of rank size/2, independent of size */
#define MOD 1000003L

static long serial_bookkeeping(const long *a, long n, int iter)
{
    long s = 0;
    for (long k = 0; k < BOOKKEEPING; k++)
        s = (s + a[(k * 31) % n] * ((k ^ iter) & 7)) % MOD;
    return s;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 20;
    long n = GLOBAL_ROWS / size, first = rank * n;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    int bookkeeper = size / 2;
    long *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    for (long i = 0; i < n; i++)
        a[i] = (first + i) % 97;
    long book = 0, check = 0;

    for (int it = 0; it < iterations; it++) {
        long halo[2] = {0, 0}, local = 0, global;
        MPI_Sendrecv(&a[0], 1, MPI_LONG, left, 0, &halo[1], 1, MPI_LONG, right, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&a[n - 1], 1, MPI_LONG, right, 1, &halo[0], 1, MPI_LONG, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
#pragma omp parallel reduction(+ : local)
        {
#pragma omp for schedule(static)
            for (long i = 0; i < n; i++) {
                long l = i > 0 ? a[i - 1] : halo[0], r = i < n - 1 ? a[i + 1] : halo[1];
                b[i] = (l + 2 * a[i] + r + it) % MOD;
                local += b[i] & 15;
            }
#pragma omp master
            if (rank == bookkeeper && !getenv("SAMPLE_FIXED"))   /* SAMPLE_FIXED=1: the fixed program */
                book = (book + serial_bookkeeping(b, n, it)) % MOD;
#pragma omp barrier
        }
        long *t = a; a = b; b = t;
        MPI_Allreduce(&local, &global, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        check = (check + global) % MOD;
    }
    long all_book;
    MPI_Allreduce(&book, &all_book, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("hybrid_master: %d ranks, %d iterations, checksum %ld, bookkeeping %ld\n", size, iterations, check,
               all_book);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
