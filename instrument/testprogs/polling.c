/* Trace mode with polling (tests/test_trace_record.py): rank 1 posts a receive and polls it with
 * MPI_Test (and probes with MPI_Iprobe, and tests an empty Testany/Testsome set of one request)
 * until rank 0, which first computes for `delay_ms`, sends.  Every poll but the last finds nothing,
 * so the trace must stay small however many polls there are, and the last MPI_Test must hold the
 * completion (the receive) that the wait-state analysis needs.
 *   polling [polls] [delay_ms]   at least `polls` unsuccessful MPI_Test calls (default 100000) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
    long polls = argc > 1 ? atol(argv[1]) : 100000;
    int delay_ms = argc > 2 ? atoi(argv[2]) : 200;
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        /* late sender: compute until rank 1 has polled enough, then send */
        long done = 0;
        MPI_Recv(&done, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double until = now() + delay_ms / 1000.0;
        volatile double s = 0;
        while (now() < until)
            s += 1.0;
        x = 42;
        MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Request req;
        int flag = 0;
        long unsuccessful = 0;
        MPI_Irecv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &req);
        for (long i = 0; i < polls / 2; i++) {       /* nothing can arrive before rank 0 is told */
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            unsuccessful++;
            int found = 0, index, outcount;
            MPI_Iprobe(0, 7, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE);   /* tag 7 is never sent */
            if (i % 1000 == 0) {
                MPI_Testany(1, &req, &index, &found, MPI_STATUS_IGNORE);
                MPI_Testsome(1, &req, &outcount, &index, MPI_STATUS_IGNORE);
            }
        }
        MPI_Send(&unsuccessful, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
        while (!flag) {
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            if (!flag)
                unsuccessful++;
        }
        printf("unsuccessful tests %ld received %d\n", unsuccessful, x);
    }
    MPI_Finalize();
    return 0;
}
