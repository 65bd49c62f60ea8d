/* PMPI wrappers: one-sided communication. Put/Get/Accumulate record an RMA row towards the target's
 * world rank (comm = the window's communicator); synchronisation calls that can block count as waiting. */
#include "sg_mpi_state.h"

static void rma_dep(struct sg_thread *t, uint32_t v, MPI_Win win, int target, int64_t bytes, int trace_kind) {
    if (sg_trace_on)
        sg_trace_rma_op(t, trace_kind, win, target, bytes, 0);
    if (target == MPI_PROC_NULL || !sg_take_dep(t))
        return;
    int32_t idx = sg_win_comm(win);
    sg_record_dep(v, SG_DEP_RMA, sg_comm_world_rank(idx, target), -1, sg_comm_id(idx), bytes, 0);
}

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
    SG_BEGIN(PMPI_Win_create(base, size, disp_unit, info, comm, win))
    if (rc_ == MPI_SUCCESS)
        sg_win_register(*win, comm);
    if (sg_trace_on && rc_ == MPI_SUCCESS)
        sg_trace_win_create(t_, *win, comm);
    SG_END(SG_WAITING)
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
    SG_BEGIN(PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win))
    if (rc_ == MPI_SUCCESS)
        sg_win_register(*win, comm);
    if (sg_trace_on && rc_ == MPI_SUCCESS)
        sg_trace_win_create(t_, *win, comm);
    SG_END(SG_WAITING)
}

int MPI_Win_free(MPI_Win *win) {
    MPI_Win saved = *win;
    SG_BEGIN(PMPI_Win_free(win))
    if (sg_trace_on && rc_ == MPI_SUCCESS)
        sg_trace_win_free(t_, saved);
    if (rc_ == MPI_SUCCESS)
        sg_win_forget(saved);
    SG_END(SG_WAITING)
}

int MPI_Put(const void *oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
            MPI_Datatype ttype, MPI_Win win) {
    SG_BEGIN(PMPI_Put(oaddr, ocount, otype, target, tdisp, tcount, ttype, win))
    rma_dep(t_, v_, win, target, sg_bytes(ocount, otype), SG_TEV_RMA_PUT);
    SG_END(SG_NOT_WAITING)
}

int MPI_Get(void *oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
            MPI_Datatype ttype, MPI_Win win) {
    SG_BEGIN(PMPI_Get(oaddr, ocount, otype, target, tdisp, tcount, ttype, win))
    rma_dep(t_, v_, win, target, sg_bytes(ocount, otype), SG_TEV_RMA_GET);
    SG_END(SG_NOT_WAITING)
}

int MPI_Accumulate(const void *oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp,
                   int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win) {
    SG_BEGIN(PMPI_Accumulate(oaddr, ocount, otype, target, tdisp, tcount, ttype, op, win))
    rma_dep(t_, v_, win, target, sg_bytes(ocount, otype), SG_TEV_RMA_ACC);
    SG_END(SG_NOT_WAITING)
}

int MPI_Get_accumulate(const void *oaddr, int ocount, MPI_Datatype otype, void *raddr, int rcount,
                       MPI_Datatype rtype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype,
                       MPI_Op op, MPI_Win win) {
    SG_BEGIN(PMPI_Get_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, target, tdisp, tcount, ttype,
                                 op, win))
    rma_dep(t_, v_, win, target, sg_bytes(ocount, otype) + sg_bytes(rcount, rtype), SG_TEV_RMA_ACC);
    SG_END(SG_NOT_WAITING)
}

/* synchronisation calls: their RMA_SYNC events in trace mode (docs/rma-patterns.md) */
#define RMA_SYNC_CALL(pmpi_call, trace_call)                                                      \
    SG_BEGIN(pmpi_call)                                                                           \
    if (sg_trace_on && rc_ == MPI_SUCCESS)                                                        \
        trace_call;                                                                               \
    SG_END(SG_WAITING)

int MPI_Win_fence(int assert_, MPI_Win win) {
    RMA_SYNC_CALL(PMPI_Win_fence(assert_, win), sg_trace_rma_sync(t_, win, MPI_PROC_NULL, 0))
}
int MPI_Win_post(MPI_Group group, int assert_, MPI_Win win) {
    SG_BEGIN(PMPI_Win_post(group, assert_, win))
    if (sg_trace_on && rc_ == MPI_SUCCESS)
        sg_trace_rma_group(t_, win, group);
    SG_END(SG_NOT_WAITING)
}
int MPI_Win_start(MPI_Group group, int assert_, MPI_Win win) {
    RMA_SYNC_CALL(PMPI_Win_start(group, assert_, win), sg_trace_rma_group(t_, win, group))
}
int MPI_Win_complete(MPI_Win win) {
    RMA_SYNC_CALL(PMPI_Win_complete(win), sg_trace_rma_sync(t_, win, MPI_PROC_NULL, 0))
}
int MPI_Win_wait(MPI_Win win) { RMA_SYNC_CALL(PMPI_Win_wait(win), sg_trace_rma_sync(t_, win, MPI_PROC_NULL, 0)) }
int MPI_Win_lock(int type, int rank, int assert_, MPI_Win win) {
    RMA_SYNC_CALL(PMPI_Win_lock(type, rank, assert_, win),
                  sg_trace_rma_sync(t_, win, rank, type == MPI_LOCK_SHARED ? 2 : 1))
}
int MPI_Win_unlock(int rank, MPI_Win win) {
    RMA_SYNC_CALL(PMPI_Win_unlock(rank, win), sg_trace_rma_sync(t_, win, rank, 0))
}
int MPI_Win_lock_all(int assert_, MPI_Win win) { SG_PLAIN(PMPI_Win_lock_all(assert_, win), SG_WAITING) }
int MPI_Win_unlock_all(MPI_Win win) { SG_PLAIN(PMPI_Win_unlock_all(win), SG_WAITING) }
int MPI_Win_flush(int rank, MPI_Win win) { SG_PLAIN(PMPI_Win_flush(rank, win), SG_WAITING) }
