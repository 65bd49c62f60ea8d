/* Trace mode: the events inside MPI calls that need MPI to describe (see sg_trace.h for the file and
 * docs/rma-patterns.md for how one-sided calls appear in a trace).  Peers are world ranks. */
#include "sg_mpi_state.h"
#include <string.h>

enum { WINDOWS = 256, GROUP_MAX = 4096 };

int64_t sg_trace_post(int kind, int32_t peer, int32_t tag, int32_t comm_index, int64_t bytes) {
    struct sg_thread *t = sg_thread_self();
    if (peer == MPI_PROC_NULL || !sg_trace_traces(t))   /* no post event, so no completion event either */
        return -1;
    int64_t id = sg_trace_new_id();
    if (kind == SG_DEP_SEND)
        sg_trace_event(t, SG_TEV_ISEND, sg_comm_world_rank(comm_index, peer), tag, sg_comm_id(comm_index), bytes, id);
    else
        sg_trace_event(t, SG_TEV_IRECV_REQUEST, -1, tag, sg_comm_id(comm_index), 0, id);
    return id;
}

static int pending_root_ = -1, pending_shape_;   /* main thread only, like the rest of the trace */

void sg_trace_coll_root(struct sg_thread *t, int root, int shape) {
    if (!sg_trace_traces(t))
        return;
    pending_root_ = root;
    pending_shape_ = shape;
}

/* `bytes` is what the wrapper says this rank contributes (the buffer's count).  Sent and received
 * bytes follow the data's direction: a one-to-n call sends from the root and receives elsewhere, an
 * n-to-one call receives at the root; the n-to-n ones (and scans) send and receive that amount.
 * Rooted calls on intercommunicators (MPI_ROOT, MPI_PROC_NULL) get no root. */
void sg_trace_coll(struct sg_thread *t, MPI_Comm comm, int64_t bytes) {
    int root = pending_root_, shape = pending_shape_;
    pending_root_ = -1;
    pending_shape_ = 0;
    int32_t idx = sg_comm_index(comm);
    int32_t world_root = -1;
    int64_t sent = bytes, received = bytes;
    if (shape && root >= 0) {
        int me = -1;
        PMPI_Comm_rank(comm, &me);
        world_root = sg_comm_world_rank(idx, root);
        if (shape == SG_COLL_1TON) {
            sent = me == root ? bytes : 0;
            received = me == root ? 0 : bytes;
        } else {
            received = me == root ? bytes : 0;
        }
    }
    sg_trace_event(t, SG_TEV_COLL_BEGIN, -1, 0, -1, 0, -1);
    sg_trace_event(t, SG_TEV_COLL_END, world_root, 0, sg_comm_id(idx), sent, received);
}

/* ---- windows: handle -> (trace window id, communicator index); main thread only ---- */
static struct { MPI_Win handle; int32_t id, comm_idx; } wins_[WINDOWS];
static int nwins_;
static int32_t next_win_id_;

static int win_slot(MPI_Win w) {
    for (int i = 0; i < nwins_; i++)
        if (wins_[i].handle == w)
            return i;
    return -1;
}

void sg_trace_win_create(struct sg_thread *t, MPI_Win win, MPI_Comm comm) {
    int32_t idx = sg_comm_index(comm);
    int32_t id = next_win_id_++;
    if (nwins_ < WINDOWS)
        wins_[nwins_++] = (typeof(wins_[0])){win, id, idx};
    sg_trace_event(t, SG_TEV_WINDOW_DEF, sg_comm_id(idx), 0, id, 0, -1);
    sg_trace_event(t, SG_TEV_RMA_SYNC, -1, 0, id, 0, -1);
}

void sg_trace_win_free(struct sg_thread *t, MPI_Win win) {
    int i = win_slot(win);
    if (i < 0)
        return;
    sg_trace_event(t, SG_TEV_RMA_SYNC, -1, 0, wins_[i].id, 0, -1);
    wins_[i] = wins_[--nwins_];
}

void sg_trace_rma_sync(struct sg_thread *t, MPI_Win win, int target, int tag) {
    int i = win_slot(win);
    if (i < 0)
        return;
    int32_t peer = target == MPI_PROC_NULL ? -1 : sg_comm_world_rank(wins_[i].comm_idx, target);
    sg_trace_event(t, SG_TEV_RMA_SYNC, peer, tag, wins_[i].id, 0, -1);
}

void sg_trace_rma_group(struct sg_thread *t, MPI_Win win, MPI_Group group) {
    int i = win_slot(win), n = 0;
    if (i < 0 || PMPI_Group_size(group, &n) != MPI_SUCCESS)
        return;
    static int ranks[GROUP_MAX], world[GROUP_MAX];   /* main thread only */
    MPI_Group world_group;
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    for (int first = 0; first < n; first += GROUP_MAX) {
        int m = n - first < GROUP_MAX ? n - first : GROUP_MAX;
        for (int k = 0; k < m; k++)
            ranks[k] = first + k;
        PMPI_Group_translate_ranks(group, m, ranks, world_group, world);
        for (int k = 0; k < m; k++)
            sg_trace_event(t, SG_TEV_RMA_SYNC, world[k] == MPI_UNDEFINED ? -1 : world[k], 0, wins_[i].id, 0, -1);
    }
    PMPI_Group_free(&world_group);
}

void sg_trace_rma_op(struct sg_thread *t, int kind, MPI_Win win, int target, int64_t bytes, int64_t bytes_back) {
    int i = win_slot(win);
    if (i < 0 || target == MPI_PROC_NULL)
        return;
    (void)bytes_back;
    sg_trace_event(t, kind, sg_comm_world_rank(wins_[i].comm_idx, target), 0, wins_[i].id, bytes,
                   sg_trace_new_id());
}
