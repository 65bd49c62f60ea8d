/* masterworker: a serial bottleneck at the master.
 *
 * Rank 0 hands out TASKS tasks to the workers (MPI_Send) and receives their results
 * (MPI_Recv from MPI_ANY_SOURCE).  Before it hands out the next task it merges each result into
 * the global table, serially.  Adding workers divides the task computation, but the merging stays
 * on one rank: from 4 ranks on the workers spend their time waiting in MPI_Recv for the next task.
 * Root cause: the merge loop in merge_result, run by rank 0 only.
 *
 * Integer arithmetic only, and merging is commutative, so the checksum does not depend on the
 * order in which results arrive.
 *
 * usage: masterworker [tasks]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TASK_WORK 2000000L     /* iterations per task on a worker */
#define MERGE_WORK 4000000L     /* iterations per merged result on the master */
#define TABLE 4096
#define TAG_TASK 1
#define TAG_STOP 2
#define TAG_RESULT 3

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static uint64_t compute_task(uint64_t task)
{
    uint64_t h = task + 1;
    for (long i = 0; i < TASK_WORK; i++)
        h = mix(h + (uint64_t)i);
    return h;
}

static void merge_result(uint64_t *table, uint64_t result)
{
    uint64_t h = result;
    for (long i = 0; i < MERGE_WORK; i++) {
        h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ULL + (uint64_t)i;
        table[h % TABLE] += result;
    }
}

static void master(int size, long tasks)
{
    uint64_t *table = calloc(TABLE, sizeof *table);
    long next = 0, outstanding = 0;
    for (int w = 1; w < size; w++) {
        uint64_t t = (uint64_t)next;
        int tag = next < tasks ? TAG_TASK : TAG_STOP;
        MPI_Send(&t, 1, MPI_UINT64_T, w, tag, MPI_COMM_WORLD);
        if (tag == TAG_TASK) {
            next++;
            outstanding++;
        }
    }
    while (outstanding > 0) {
        uint64_t result;
        MPI_Status st;
        MPI_Recv(&result, 1, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &st);
        outstanding--;
        if (!getenv("SAMPLE_FIXED"))   /* SAMPLE_FIXED=1: the fixed program */
            merge_result(table, result);
        uint64_t t = (uint64_t)next;
        int tag = next < tasks ? TAG_TASK : TAG_STOP;
        MPI_Send(&t, 1, MPI_UINT64_T, st.MPI_SOURCE, tag, MPI_COMM_WORLD);
        if (tag == TAG_TASK) {
            next++;
            outstanding++;
        }
    }
    uint64_t checksum = 0;
    for (int i = 0; i < TABLE; i++)
        checksum ^= mix(table[i] + (uint64_t)i);
    printf("masterworker: ranks=%d tasks=%ld checksum=%016llx\n", size, tasks,
           (unsigned long long)checksum);
    free(table);
}

static void worker(void)
{
    for (;;) {
        uint64_t task;
        MPI_Status st;
        MPI_Recv(&task, 1, MPI_UINT64_T, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP)
            break;
        uint64_t result = compute_task(task);
        MPI_Send(&result, 1, MPI_UINT64_T, 0, TAG_RESULT, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long tasks = argc > 1 ? atol(argv[1]) : 40;
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "masterworker: needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        master(size, tasks);
    else
        worker();
    MPI_Finalize();
    return 0;
}
