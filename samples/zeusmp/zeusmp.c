/* zeusmp: the Zeus-MP case of ScalAna (seed 003 §VII-A): non-blocking halo exchange where only
 * some ranks run an extra loop.
 *
 * A 3-D grid is split into slabs along x (strong scaling).  Each step posts MPI_Irecv/MPI_Isend of
 * both faces, updates the interior, waits with MPI_Waitall and agrees on the time step with
 * MPI_Allreduce.  The ranks that own a physical boundary (the first and the last) first apply the
 * boundary conditions: a loop over the whole y-z face, repeated BVAL_SWEEPS times, whose cost does not
 * shrink with the rank count (the face does not get smaller when the slabs get thinner).  The
 * interior ranks wait for them in MPI_Waitall, and everybody in the MPI_Allreduce.
 * Root cause: the loop in boundary_values (like bval3d.F:155 in Zeus-MP).
 *
 * usage: zeusmp [steps]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define NX 256
#define NY 96
#define NZ 96
#define BVAL_SWEEPS 400

#define AT(u, i, j, k) (u)[((long)(i) * NY + (j)) * NZ + (k)]

/* Boundary conditions on the outer face (plane 1 or plane nx): BVAL_SWEEPS implicit relaxation
 * sweeps along the face, each cell taking its already updated neighbour (a recurrence). */
static void boundary_values(double *u, int plane, int step)
{
    for (int s = 0; s < BVAL_SWEEPS; s++)
        for (int jk = 1; jk < NY * NZ; jk++)
            AT(u, plane, 0, jk) = 0.5 * AT(u, plane, 0, jk) + 0.25 * AT(u, plane, 0, jk - 1) + 0.01 * ((jk + s + step) & 3);
}

/* Interior update of planes 1..nx (ghost planes 0 and nx+1). */
static double update_interior(const double *u, double *v, int nx)
{
    double change = 0.0;
    for (int i = 1; i <= nx; i++)
        for (int j = 1; j < NY - 1; j++)
            for (int k = 1; k < NZ - 1; k++) {
                double nb = AT(u, i - 1, j, k) + AT(u, i + 1, j, k) + AT(u, i, j - 1, k)
                          + AT(u, i, j + 1, k) + AT(u, i, j, k - 1) + AT(u, i, j, k + 1);
                AT(v, i, j, k) = 0.4 * AT(u, i, j, k) + 0.1 * nb;
                double d = AT(v, i, j, k) - AT(u, i, j, k);
                change += d * d;
            }
    return change;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int steps = argc > 1 ? atoi(argv[1]) : 24;
    int fixed = getenv("SAMPLE_FIXED") != NULL;   /* SAMPLE_FIXED=1: the fixed program */
    int nx = NX / size;
    long plane = (long)NY * NZ;
    double *u = malloc((nx + 2) * plane * sizeof *u), *v = malloc((nx + 2) * plane * sizeof *v);
    for (long c = 0; c < (nx + 2) * plane; c++)
        u[c] = v[c] = (double)((c + (long)rank * nx * plane) % 11) / 11.0;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double dt = 1.0, total_change = 0.0;

    for (int step = 0; step < steps; step++) {
        if (rank == 0 && !fixed)
            boundary_values(u, 1, step);
        if (rank == size - 1 && !fixed)
            boundary_values(u, nx, step);
        MPI_Request req[4];
        MPI_Irecv(&AT(u, 0, 0, 0), (int)plane, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(&AT(u, nx + 1, 0, 0), (int)plane, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[1]);
        MPI_Isend(&AT(u, nx, 0, 0), (int)plane, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(&AT(u, 1, 0, 0), (int)plane, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        double change = update_interior(u, v, nx), global_change;
        MPI_Allreduce(&change, &global_change, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        dt = 1.0 / (1.0 + global_change * 1e-6);
        total_change += global_change * dt;
        double *t = u; u = v; v = t;
    }

    if (rank == 0)
        printf("zeusmp: ranks=%d steps=%d change=%.6e dt=%.6e\n", size, steps, total_change, dt);
    free(u); free(v);
    MPI_Finalize();
    return 0;
}
