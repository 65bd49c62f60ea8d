/* PSG test case (C): loops, branches, recursion and an indirect call around MPI.
 * The structure the static pass must find is asserted in tests/test_static_samples.py. */
#include <mpi.h>
#include <stdio.h>

static int rank, size;
static double grid[64][64];

static void smooth(void) {                 /* a 3-deep loop nest, no MPI */
    for (int it = 0; it < 4; ++it)
        for (int i = 1; i < 63; ++i)
            for (int j = 1; j < 63; ++j)
                grid[i][j] = 0.25 * (grid[i - 1][j] + grid[i + 1][j] + grid[i][j - 1] + grid[i][j + 1]);
}

static double scale(double x) { return 2.0 * x + 1.0; }   /* no loop, no MPI: merged */

static double tree_sum(int level, double v) {             /* recursion reaching MPI */
    if (level == 0) {
        double out;
        MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        return out;
    }
    return tree_sum(level - 1, scale(v));
}

static void op_reduce(double *x) {
    double y;
    MPI_Allreduce(x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *x = y;
}

static void op_local(double *x) {
    for (int k = 0; k < 10; ++k)
        *x += k;
}

typedef void (*op_fn)(double *);

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    op_fn ops[2] = {op_reduce, op_local};
    double v = rank;
    for (int step = 0; step < 3; ++step) {
        smooth();
        if (rank % 2 == 0) {
            if (rank + 1 < size)
                MPI_Send(&v, 1, MPI_DOUBLE, rank + 1, step, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&v, 1, MPI_DOUBLE, rank - 1, step, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        ops[step % 2](&v);
    }
    v = tree_sum(2, v);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("v=%g\n", v);
    MPI_Finalize();
    return 0;
}
