/* balanced: the control sample, a well-balanced program with no scaling problem.
 *
 * A 1-D Jacobi relaxation split evenly over the ranks (strong scaling): every rank does the same
 * share of the work, exchanges one value with each neighbour per step and the ranks reduce a
 * residual only every few steps.  The work per rank shrinks as 1/size and nothing waits for long.
 * A detector must report no root cause here.
 *
 * usage: balanced [steps]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define GLOBAL_CELLS 50000L      /* small enough to stay in cache at every scale: ideal strong scaling */
#define SWEEPS_PER_STEP 7200

static void relax(double *u, double *v, long n)
{
    for (int s = 0; s < SWEEPS_PER_STEP; s++) {
        for (long i = 1; i <= n; i++)
            v[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
        for (long i = 1; i <= n; i++)
            u[i] = v[i];
    }
}

static double residual(const double *u, long n)
{
    double s = 0.0;
    for (long i = 1; i <= n; i++) {
        double d = u[i] - 0.5 * (u[i - 1] + u[i + 1]);
        s += d * d;
    }
    return s;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    long n = GLOBAL_CELLS / size, first = rank * n;
    double *u = malloc((n + 2) * sizeof *u), *v = malloc((n + 2) * sizeof *v);
    for (long i = 0; i < n + 2; i++)
        u[i] = v[i] = (double)((first + i) % 13) / 13.0;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double res = 0.0;

    for (int step = 0; step < steps; step++) {
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[n + 1], 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        relax(u, v, n);
        if (step % 5 == 4) {
            double local = residual(u, n);
            MPI_Allreduce(&local, &res, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
    }

    if (rank == 0)
        printf("balanced: ranks=%d steps=%d residual=%.6e\n", size, steps, res);
    free(u); free(v);
    MPI_Finalize();
    return 0;
}
