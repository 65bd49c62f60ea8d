/* cg: the ScalAna motivating case (NPB-CG with an injected delay, seed 003 Fig. 2).
 *
 * Conjugate gradients on a 1-D Laplacian, rows split evenly over the ranks (strong scaling).
 * Every iteration exchanges halo values with both neighbours (MPI_Sendrecv) and reduces two dot
 * products (MPI_Allreduce).  One rank (size/2) additionally runs an "audit" loop of fixed size
 * each iteration: its cost does not shrink with the rank count, its neighbours wait for it in the
 * halo exchange and everybody else waits in the Allreduce.  Root cause: the loop in audit_residual.
 *
 * usage: cg [iterations]      prints a checksum that depends only on the rank count and iterations
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define GLOBAL_ROWS 1200000L
#define AUDIT_WORK 9000000L     /* operations per iteration on the audited rank, independent of size */

static double audit_residual(const double *r, long n, int iter)
{
    double s = 0.0;
    for (long k = 0; k < AUDIT_WORK; k++)
        s += r[k % n] * (double)((k ^ iter) & 7);
    return s * 1e-12;
}

/* q = A p for A = tridiag(-1, 2.01, -1); halo[0], halo[1] hold the neighbours' boundary values. */
static void matvec(const double *p, double *q, long n, const double halo[2])
{
    for (long i = 0; i < n; i++) {
        double left = i > 0 ? p[i - 1] : halo[0];
        double right = i < n - 1 ? p[i + 1] : halo[1];
        q[i] = 2.01 * p[i] - left - right;
    }
}

static double local_dot(const double *a, const double *b, long n)
{
    double s = 0.0;
    for (long i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 20;
    long n = GLOBAL_ROWS / size;
    long first = rank * n;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    int audited = size / 2;

    double *x = calloc(n, sizeof *x), *r = malloc(n * sizeof *r);
    double *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
    for (long i = 0; i < n; i++)
        r[i] = p[i] = 1.0 + (double)((first + i) % 17) / 17.0;
    double rho_local = local_dot(r, r, n), rho, audit = 0.0;
    MPI_Allreduce(&rho_local, &rho, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

    for (int it = 0; it < iterations; it++) {
        if (rank == audited && !getenv("SAMPLE_FIXED"))   /* SAMPLE_FIXED=1: the fixed program */
            audit += audit_residual(r, n, it);
        double halo[2] = {0.0, 0.0};
        MPI_Sendrecv(&p[0], 1, MPI_DOUBLE, left, 0, &halo[1], 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&p[n - 1], 1, MPI_DOUBLE, right, 1, &halo[0], 1, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        matvec(p, q, n, halo);
        double pq_local = local_dot(p, q, n), pq;
        MPI_Allreduce(&pq_local, &pq, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double alpha = rho / pq;
        for (long i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        double rho_new_local = local_dot(r, r, n), rho_new;
        MPI_Allreduce(&rho_new_local, &rho_new, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double beta = rho_new / rho;
        rho = rho_new;
        for (long i = 0; i < n; i++)
            p[i] = r[i] + beta * p[i];
    }

    double sums[2] = {local_dot(x, x, n), audit}, total[2];
    MPI_Reduce(sums, total, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("cg: ranks=%d iterations=%d residual=%.6e |x|^2=%.6e audit=%.6e\n",
               size, iterations, rho, total[0], total[1]);
    free(x); free(r); free(p); free(q);
    MPI_Finalize();
    return 0;
}
