/* PSG test case (two files): calls into another translation unit. exchange() reaches MPI and
 * stays a CALL; helper() has no loop and no MPI, so the link step merges its call into a COMP. */
#include <mpi.h>
#include <stdio.h>

double exchange(double v);
double helper(double v);

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double v = rank;
    for (int i = 0; i < 3; ++i) {
        v = helper(v);
        v = exchange(v);
    }
    if (rank == 0)
        printf("v=%g\n", v);
    MPI_Finalize();
    return 0;
}
