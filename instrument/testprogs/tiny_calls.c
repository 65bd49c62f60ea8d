/* Trace throttling: `tiny` is called N times for well under 10 us each, `work` 20 times for a few
 * milliseconds each.  usage: tiny_calls N    prints a checksum and the calls each function had. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* a loop of unknown trip count keeps the function in the program graph, with its probes */
__attribute__((noinline)) static double tiny(int i, int reps)
{
    double s = 0.0;
    for (int k = 0; k < reps; k++)
        s += (double)((k ^ i) & 7) * 0.5;
    return s;
}

__attribute__((noinline)) static double work(int i, int reps)
{
    double s = 0.0;
    for (int k = 0; k < reps; k++)
        s += (double)((k ^ i) & 3);
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    int small = argc > 2 ? atoi(argv[2]) : 3;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += tiny(i, small);
    for (int i = 0; i < 20; i++)
        s += work(i, 2000000);
    double total = 0.0;
    MPI_Allreduce(&s, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("tiny_calls: total %.1f tiny %d work 20\n", total, n);
    MPI_Finalize();
    return 0;
}
