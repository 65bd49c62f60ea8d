/* Shared by the PMPI wrapper files: communicators, requests, windows and the wrapper macros. */
#ifndef SG_MPI_STATE_H
#define SG_MPI_STATE_H
#include <mpi.h>
#include "sg_internal.h"
#include "sg_trace_mpi.h"

enum { SG_DEP_SEND = 0, SG_DEP_RECV = 1, SG_DEP_COLL = 2, SG_DEP_RMA = 3 };
enum { SG_WAITING = 1, SG_NOT_WAITING = 0 };

int32_t sg_comm_index(MPI_Comm comm) SG_HIDDEN;      /* registers on first sight; -1 if unknown */
void sg_comm_register(MPI_Comm comm) SG_HIDDEN;      /* after a communicator was created */
void sg_comm_forget(MPI_Comm comm) SG_HIDDEN;        /* before MPI_Comm_free */
void sg_win_register(MPI_Win win, MPI_Comm comm) SG_HIDDEN;
int32_t sg_win_comm(MPI_Win win) SG_HIDDEN;
void sg_win_forget(MPI_Win win) SG_HIDDEN;

/* a posted non-blocking operation, kept until the Wait/Test that completes it */
void sg_req_post(MPI_Request req, int kind, int32_t peer, int32_t tag, int32_t comm_index,
                 int64_t bytes, int persistent) SG_HIDDEN;
/* record the dependence of a completed request at `vertex`, blocked for recv_wait_ns if it is a
 * receive or collective, send_wait_ns if a send; returns 1 if the request was known */
int sg_req_complete(MPI_Request req, const MPI_Status *st, uint32_t vertex, uint64_t recv_wait_ns,
                    uint64_t send_wait_ns) SG_HIDDEN;
int sg_req_kind(MPI_Request req) SG_HIDDEN;   /* SG_DEP_* of a posted request, -1 if unknown */
/* A multi-completion blocks until its last request is done, and that is the data it waited for: its
 * time goes to the receives and collectives it completed, in equal shares, and to the sends only when
 * it completed nothing else. reqs[idx[i]] (or reqs[i] without idx), i < n, are the completed ones. */
void sg_wait_shares(const MPI_Request *reqs, const int *idx, int n, uint64_t dt, uint64_t *recv_share,
                    uint64_t *send_share) SG_HIDDEN;
void sg_req_forget(MPI_Request req, uint32_t vertex) SG_HIDDEN;

void sg_mpi_after_init(void) SG_HIDDEN;
void sg_mpi_before_finalize(uint32_t vertex) SG_HIDDEN;

int64_t sg_bytes(int count, MPI_Datatype type) SG_HIDDEN;
int sg_take_dep(struct sg_thread *t) SG_HIDDEN;       /* SCALGRAPH_COMM_SAMPLE decision */
void sg_p2p_dep(struct sg_thread *t, uint32_t v, int kind, int peer, int tag, MPI_Comm comm,
                int64_t bytes, const MPI_Status *st, uint64_t wait_ns) SG_HIDDEN;
void sg_coll_dep(struct sg_thread *t, uint32_t v, MPI_Comm comm, int64_t bytes, uint64_t wait_ns) SG_HIDDEN;

/* Wrapper skeleton: inside another wrapper (an MPI library calling MPI_* internally) go straight
 * to PMPI; otherwise resolve the vertex, time the call and charge it, with the computation since the
 * thread's previous MPI call (sg_mpi_enter/sg_mpi_leave). */
#define SG_BEGIN(pmpi_call)                                                                       \
    struct sg_thread *t_ = sg_thread_self();                                                      \
    if (t_->in_mpi)                                                                               \
        return pmpi_call;                                                                         \
    t_->in_mpi = 1;                                                                               \
    uint32_t v_ = sg_vertex_of(t_);                                                               \
    uint64_t t0_;                                                                                 \
    uint64_t c0_ = sg_mpi_enter(t_, &t0_);                                                        \
    int rc_ = pmpi_call;                                                                          \
    uint64_t dt_ = sg_now_ns() - t0_;                                                             \
    (void)dt_;                                                                                    \
    static int32_t sg_rid_ = -1;   /* this wrapper's region in the trace */                       \
    if (sg_trace_on)                                                                              \
        sg_trace_mpi_enter(t_, &sg_rid_, __func__, v_, t0_, t0_ + dt_);

#define SG_END(waiting)                                                                           \
    if (sg_trace_on)                                                                              \
        sg_trace_mpi_exit(t_);                                                                    \
    sg_mpi_leave(t_, v_, t0_, dt_, c0_, waiting);                                                 \
    t_->in_mpi = 0;                                                                               \
    return rc_;

#define SG_PLAIN(pmpi_call, waiting)                                                              \
    SG_BEGIN(pmpi_call)                                                                           \
    SG_END(waiting)

#endif
