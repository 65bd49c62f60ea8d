/* Second translation unit of the two-file PSG test case. */
#include <mpi.h>

double helper(double v) { return v * 0.5 + 1.0; }

double exchange(double v) {
    double out;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
}
