/* The MPI program of ScalAna's Figure 3 (Jin et al., SC'20), made runnable.
 * Expected PSG: Figure 4(b) in full; with MaxLoopDepth=1, Figure 4(c):
 * main{ Loop1{Comp}, foo{ Branch{MPI_Send, MPI_Recv} }, MPI_Bcast }. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2000
static double A[N];
static double sum, product = 1.0;
static int myRank, nProcs;

void foo(void);

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
    MPI_Comm_size(MPI_COMM_WORLD, &nProcs);
    for (int i = 0; i < N; ++i) {          /* Loop 1 */
        A[i] = rand() % 7;
        for (int j = 0; j < i; ++j)        /* Loop 1.1 */
            sum += A[j];
        for (int k = 0; k < i; ++k)        /* Loop 1.2 */
            product *= A[k] > 0 ? 1.0 : 0.5;
    }
    foo();
    MPI_Bcast(&sum, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (myRank == 0)
        printf("sum=%.0f product=%g\n", sum, product);
    MPI_Finalize();
    return 0;
}

void foo(void) {
    double buf = myRank;
    int right = myRank + 1 < nProcs ? myRank + 1 : MPI_PROC_NULL;
    if (myRank % 2 == 0)
        MPI_Send(&buf, 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD);
    else
        MPI_Recv(&buf, 1, MPI_DOUBLE, myRank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
