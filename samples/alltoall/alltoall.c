/* alltoall: a collective that itself scales badly.
 *
 * Each step transforms the local part of a fixed-size data set (strong scaling: the work per rank
 * shrinks as 1/size) and then redistributes it with MPI_Alltoall, sending BLOCK doubles to every
 * other rank.  The block per pair is fixed (as in a transpose whose tile size is set by the
 * problem), so the data each rank sends grows with the rank count and so does the time spent in
 * the collective, while the computation shrinks.  Nobody waits for a late rank here: the collective
 * is slow on every rank.  Root cause: the MPI_Alltoall call in redistribute.
 *
 * usage: alltoall [steps]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define GLOBAL_WORK 16000000L  /* element updates per step, divided over the ranks */
#define BLOCK 131072           /* doubles sent to each rank per step */

static void redistribute(const double *send, double *recv)
{
    MPI_Alltoall(send, BLOCK, MPI_DOUBLE, recv, BLOCK, MPI_DOUBLE, MPI_COMM_WORLD);
}

static void transform(double *data, long n, long work, int step)
{
    for (long w = 0; w < work; w++) {
        long i = w % n;
        data[i] = 0.999 * data[i] + 0.001 * (double)((w + step) & 15);
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int steps = argc > 1 ? atoi(argv[1]) : 12;
    long n = (long)BLOCK * size;
    double *send = malloc(n * sizeof *send), *recv = malloc(n * sizeof *recv);
    for (long i = 0; i < n; i++)
        send[i] = (double)((i + rank) % 7);

    for (int step = 0; step < steps; step++) {
        transform(send, n, GLOBAL_WORK / size, step);
        redistribute(send, recv);
        double *t = send; send = recv; recv = t;
    }

    double local = 0.0, total;
    for (long i = 0; i < n; i++)
        local += send[i] * (double)(i % 3 + 1);
    MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("alltoall: ranks=%d steps=%d checksum=%.6e\n", size, steps, total);
    free(send); free(recv);
    MPI_Finalize();
    return 0;
}
