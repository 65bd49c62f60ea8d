/* PMPI wrappers: start-up and shut-down (run metadata, clock offsets, writing the file) and
 * communicator creation (each new communicator's group is recorded once, as world ranks). */
#define _GNU_SOURCE
#include "sg_mpi_state.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Comm sync_comm_ = MPI_COMM_NULL;   /* the shim's own traffic never meets the program's */

static double mono_seconds(void) { return 1e-9 * (double)sg_clock_ns(); }

/* Ping-pong rounds per rank for the clock offsets: SCALGRAPH_CLOCK_SYNC=N, 0 = off. By default
 * (auto) 4 rounds, and none at all when the launcher says every rank runs on this host: they then
 * read one and the same CLOCK_MONOTONIC, so every offset is exactly 0 (recorded with rtt 0). The
 * ping-pong costs a scheduler time slice per message when ranks outnumber cores. */
static int sync_rounds(int nranks) {
    const char *env = getenv("SCALGRAPH_CLOCK_SYNC");
    if (env && *env) {
        int rounds = atoi(env);
        return rounds < 0 ? 0 : rounds > 100 ? 100 : rounds;
    }
    const char *local = getenv("MPI_LOCALNRANKS");                 /* MPICH's Hydra */
    if (local == NULL)
        local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");              /* Open MPI */
    if (local != NULL && atoi(local) == nranks)
        return 0;
    return 4;
}

/* Offset of this rank's CLOCK_MONOTONIC to rank 0's, from the ping-pong with the smallest round trip
 * (offset = midpoint of the local send/receive times minus rank 0's time in between). */
static void clock_sync(double *offset, double *rtt) {
    enum { TAG_PING = 1, TAG_PONG = 2 };
    int rank = sg_run.rank, n = sg_run.nranks, rounds = sync_rounds(n);
    *offset = 0;
    *rtt = 0;
    if (n <= 1 || sync_comm_ == MPI_COMM_NULL || rounds == 0)
        return;
    if (rank == 0) {
        for (int r = 1; r < n; r++)
            for (int i = 0; i < rounds; i++) {
                double dummy, now;
                PMPI_Recv(&dummy, 1, MPI_DOUBLE, r, TAG_PING, sync_comm_, MPI_STATUS_IGNORE);
                now = mono_seconds();
                PMPI_Send(&now, 1, MPI_DOUBLE, r, TAG_PONG, sync_comm_);
            }
        return;
    }
    double best = 1e30;
    for (int i = 0; i < rounds; i++) {
        double t1 = mono_seconds(), t0;
        PMPI_Send(&t1, 1, MPI_DOUBLE, 0, TAG_PING, sync_comm_);
        PMPI_Recv(&t0, 1, MPI_DOUBLE, 0, TAG_PONG, sync_comm_, MPI_STATUS_IGNORE);
        double t2 = mono_seconds();
        if (t2 - t1 < best) {
            best = t2 - t1;
            *offset = 0.5 * (t1 + t2) - t0;
        }
    }
    *rtt = best;
}

/* Ranks of this run sharing the host (0 if the MPI cannot tell).  The launcher says it (as for
 * sync_rounds: every rank sees the same launcher, so all take the same branch); otherwise a collective
 * over MPI_COMM_WORLD, through PMPI so the program's communicator table does not see it.  The
 * collective costs scheduler time slices when ranks outnumber cores (about 0.1 s at 8 ranks on 2). */
static uint32_t ranks_on_host(int nranks) {
    const char *local = getenv("MPI_LOCALNRANKS");                 /* MPICH's Hydra */
    if (local == NULL)
        local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");              /* Open MPI */
    if (local != NULL && atoi(local) > 0)
        return (uint32_t)atoi(local);
    if (nranks <= 1)
        return 1;
    MPI_Comm node = MPI_COMM_NULL;
    int n = 0;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS ||
        node == MPI_COMM_NULL)
        return 0;
    PMPI_Comm_size(node, &n);
    PMPI_Comm_free(&node);
    return n > 0 ? (uint32_t)n : 0;
}

/* CPUs the ranks of this host may use together: the union of their affinity masks.  Open MPI binds
 * each rank to one core when ranks do not outnumber cores, so a rank's own mask (1 CPU) would make
 * 2 bound ranks on 2 cores look like time-sharing.  Only under Open MPI's launcher (its variable is
 * set for every rank of the job alike, so all ranks take this collective or none); elsewhere, and
 * if anything fails, the rank's own mask. */
static uint32_t host_cores(uint32_t own) {
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (local == NULL || atoi(local) <= 1)
        return own;
    cpu_set_t mine, all;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0)
        CPU_ZERO(&mine);                       /* still join the collective */
    MPI_Comm node = MPI_COMM_NULL;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS ||
        node == MPI_COMM_NULL)
        return own;
    int rc = PMPI_Allreduce(&mine, &all, (int)sizeof mine, MPI_BYTE, MPI_BOR, node);
    PMPI_Comm_free(&node);
    int n = rc == MPI_SUCCESS ? CPU_COUNT(&all) : 0;
    return n > 0 ? (uint32_t)n : own;
}

void sg_mpi_after_init(void) {
    int rank = 0, size = 1, len = 0;
    sg_timer_calibrate();
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    sg_core_init(rank, size);
    sg_comm_register(MPI_COMM_WORLD);   /* first: index 0, id 0 */
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    PMPI_Get_library_version(version, &len);
    char *nl = strchr(version, '\n');
    if (nl)
        *nl = 0;
    snprintf(sg_run.mpi_library, sizeof sg_run.mpi_library, "%.255s", version);
    sg_run.cores = host_cores(sg_affinity_cores());   /* the launcher may have bound the rank by now */
    sg_run.ranks_on_host = ranks_on_host(size);
    sg_sampler_report(rank);
    if (size > 1 && sync_rounds(size) > 0)
        PMPI_Comm_dup(MPI_COMM_WORLD, &sync_comm_);
    clock_sync(&sg_run.clock_offset_init, &sg_run.clock_rtt_init);
    /* The clock sync leaves ranks out of step; without this barrier the program's first
     * communication would absorb that skew and show it as the program's own waiting. */
    if (size > 1)
        PMPI_Barrier(MPI_COMM_WORLD);
}

int MPI_Init(int *argc, char ***argv) {
    SG_BEGIN(PMPI_Init(argc, argv))
    if (rc_ == MPI_SUCCESS)
        sg_mpi_after_init();
    SG_END(SG_NOT_WAITING)
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    SG_BEGIN(PMPI_Init_thread(argc, argv, required, provided))
    if (rc_ == MPI_SUCCESS)
        sg_mpi_after_init();
    SG_END(SG_NOT_WAITING)
}

/* The shim's part of MPI_Finalize. With a final clock ping-pong to do, the file is written first, so
 * a rank whose partners hang or die (the ping-pong then never returns) still leaves its profile; it is
 * rewritten with the final clock offset once that is measured.  Without one (one host, one rank)
 * nothing can hang in between and the file is written once. */
void sg_mpi_before_finalize(uint32_t vertex) {
    struct sg_thread *t = sg_thread_self();
    uint64_t t0, c0 = sg_mpi_enter(t, &t0);
    int was_off = sg_run.sampling_off;
    sg_sampler_stop();
    if (sg_run.sampling_off && !was_off && sg_run.rank == 0)
        fprintf(stderr, "scalgraph: %s; scalgraph's samples stopped there and the program's handler was "
                        "left alone\n", sg_sampler_stop_note());
    sg_run.end_time = sg_wall_seconds();
    sg_run.clock_offset_final = sg_run.clock_rtt_final = __builtin_nan("");
    sg_mpi_leave(t, vertex, t0, 0, c0, SG_NOT_WAITING);   /* the call, and the computation before it */
    if (sync_comm_ != MPI_COMM_NULL)
        sg_write_profile(NULL, SG_FLAG_FINALIZED);
    clock_sync(&sg_run.clock_offset_final, &sg_run.clock_rtt_final);
    if (sync_comm_ != MPI_COMM_NULL)
        PMPI_Comm_free(&sync_comm_);
    uint64_t c1 = t->tracked ? sg_thread_cpu_ns() : c0;
    sg_add_time(vertex, sg_now_ns() - t0);
    sg_record_comp(vertex, 0, 0, c1 > c0 ? c1 - c0 : 0);
    sg_run.end_time = sg_wall_seconds();
    sg_write_profile(NULL, SG_FLAG_FINALIZED);
}

int MPI_Finalize(void) {
    struct sg_thread *t = sg_thread_self();
    if (t->in_mpi)
        return PMPI_Finalize();
    t->in_mpi = 1;
    uint32_t v = sg_vertex_of(t);
    uint64_t t0 = sg_now_ns();   /* for the trace */
    sg_mpi_before_finalize(v);
    int rc = PMPI_Finalize();
    if (sg_trace_on)   /* after PMPI_Finalize: its EXIT comes after every rank entered, as in MPI */
        sg_trace_finalize(t, v, t0);
    t->in_mpi = 0;
    return rc;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
    struct sg_thread *t = sg_thread_self();
    if (!t->in_mpi && sg_run.initialized && !sg_run.written) {
        uint64_t t0, c0 = sg_mpi_enter(t, &t0);
        sg_mpi_leave(t, sg_vertex_of(t), t0, 0, c0, SG_NOT_WAITING);
        sg_sampler_stop();
        sg_write_profile(NULL, SG_FLAG_ABORT);
    }
    t->in_mpi = 1;   /* MPICH may finalize inside Abort: that must not rewrite the file as "finalize" */
    return PMPI_Abort(comm, errorcode);
}

/* ---- communicator management ---- */
#define NEW_COMM_DONE()                                                                           \
    if (rc_ == MPI_SUCCESS)                                                                       \
        sg_comm_register(*newcomm);                                                               \
    SG_END(SG_WAITING)

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Comm_split(comm, color, key, newcomm))
    NEW_COMM_DONE()
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Comm_dup(comm, newcomm))
    NEW_COMM_DONE()
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Comm_create(comm, group, newcomm))
    NEW_COMM_DONE()
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm))
    NEW_COMM_DONE()
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Cart_sub(comm, remain_dims, newcomm))
    NEW_COMM_DONE()
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Comm_split_type(comm, split_type, key, info, newcomm))
    NEW_COMM_DONE()
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Comm_create_group(comm, group, tag, newcomm))
    NEW_COMM_DONE()
}

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader,
                         int tag, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newcomm))
    NEW_COMM_DONE()
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Intercomm_merge(intercomm, high, newcomm))
    NEW_COMM_DONE()
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm *newcomm) {
    SG_BEGIN(PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations,
                                             destweights, info, reorder, newcomm))
    NEW_COMM_DONE()
}

int MPI_Comm_free(MPI_Comm *comm) {
    MPI_Comm saved = *comm;
    SG_BEGIN(PMPI_Comm_free(comm))
    if (rc_ == MPI_SUCCESS)
        sg_comm_forget(saved);
    SG_END(SG_NOT_WAITING)
}
