/* Trace mode, the parts that need MPI types: posts, collectives and one-sided calls (sg_trace_mpi.c). */
#ifndef SG_TRACE_MPI_H
#define SG_TRACE_MPI_H
#include <mpi.h>
#include "sg_trace.h"

/* a non-blocking send or receive was posted: its ISEND / IRECV_REQUEST event; returns its request id */
int64_t sg_trace_post(int kind, int32_t peer, int32_t tag, int32_t comm_index, int64_t bytes) SG_HIDDEN;
enum { SG_COLL_1TON = 1, SG_COLL_NTO1 = 2 };
/* a rooted collective's wrapper names its root (comm rank) and shape before its COLL events */
void sg_trace_coll_root(struct sg_thread *t, int root, int shape) SG_HIDDEN;
void sg_trace_coll(struct sg_thread *t, MPI_Comm comm, int64_t bytes) SG_HIDDEN;
void sg_trace_win_create(struct sg_thread *t, MPI_Win win, MPI_Comm comm) SG_HIDDEN;
void sg_trace_win_free(struct sg_thread *t, MPI_Win win) SG_HIDDEN;
/* RMA_SYNC on `win` towards `target` (rank in the window's group, or MPI_PROC_NULL for none) */
void sg_trace_rma_sync(struct sg_thread *t, MPI_Win win, int target, int tag) SG_HIDDEN;
/* one RMA_SYNC per member of `group` (MPI_Win_post / MPI_Win_start) */
void sg_trace_rma_group(struct sg_thread *t, MPI_Win win, MPI_Group group) SG_HIDDEN;
void sg_trace_rma_op(struct sg_thread *t, int kind, MPI_Win win, int target, int64_t bytes,
                     int64_t bytes_back) SG_HIDDEN;

#endif
