/* PMPI wrappers: point-to-point, requests and their completion.
 * Dependences of blocking calls are recorded at the call's vertex; those of non-blocking requests at
 * the vertex of the Wait/Test that completed them (where the rank waited; seed 003 Fig. 5), with
 * MPI_SOURCE/MPI_TAG taken from the status for wildcards. */
#include "sg_mpi_state.h"
#include <stdlib.h>

/* ---- blocking sends and receives ---- */
#define SEND_WRAPPER(NAME, WAITING)                                                               \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) { \
        SG_BEGIN(PMPI_##NAME(buf, count, dt, dest, tag, comm))                                    \
        sg_p2p_dep(t_, v_, SG_DEP_SEND, dest, tag, comm, sg_bytes(count, dt), NULL, 0);           \
        SG_END(WAITING)                                                                           \
    }
SEND_WRAPPER(Send, SG_WAITING)    /* may wait for the receiver (rendezvous) */
SEND_WRAPPER(Ssend, SG_WAITING)
SEND_WRAPPER(Bsend, SG_NOT_WAITING)
SEND_WRAPPER(Rsend, SG_NOT_WAITING)

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    MPI_Status local, *st = (status == MPI_STATUS_IGNORE) ? &local : status;
    SG_BEGIN(PMPI_Recv(buf, count, dt, source, tag, comm, st))
    if (rc_ == MPI_SUCCESS)
        sg_p2p_dep(t_, v_, SG_DEP_RECV, source, tag, comm, 0, st, dt_);
    SG_END(SG_WAITING)
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                 int rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status) {
    MPI_Status local, *st = (status == MPI_STATUS_IGNORE) ? &local : status;
    SG_BEGIN(PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st))
    sg_p2p_dep(t_, v_, SG_DEP_SEND, dest, stag, comm, sg_bytes(scount, stype), NULL, 0);
    if (rc_ == MPI_SUCCESS)
        sg_p2p_dep(t_, v_, SG_DEP_RECV, source, rtag, comm, 0, st, dt_);
    SG_END(SG_WAITING)
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int source, int rtag,
                         MPI_Comm comm, MPI_Status *status) {
    MPI_Status local, *st = (status == MPI_STATUS_IGNORE) ? &local : status;
    SG_BEGIN(PMPI_Sendrecv_replace(buf, count, dt, dest, stag, source, rtag, comm, st))
    sg_p2p_dep(t_, v_, SG_DEP_SEND, dest, stag, comm, sg_bytes(count, dt), NULL, 0);
    if (rc_ == MPI_SUCCESS)
        sg_p2p_dep(t_, v_, SG_DEP_RECV, source, rtag, comm, 0, st, dt_);
    SG_END(SG_WAITING)
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    SG_PLAIN(PMPI_Probe(source, tag, comm, status), SG_WAITING)
}

/* trace mode: a poll that found or completed something is recorded even without an event in it;
 * the others are only counted per call site (sg_trace.h) */
#define SG_POLL_HIT(found)                                                                        \
    if (sg_trace_on && rc_ == MPI_SUCCESS && (found))                                             \
        sg_trace_poll_hit(t_);

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    SG_BEGIN(PMPI_Iprobe(source, tag, comm, flag, status))
    SG_POLL_HIT(*flag)
    SG_END(SG_NOT_WAITING)
}

/* ---- non-blocking and persistent posts ---- */
#define ISEND_WRAPPER(NAME, PERSISTENT)                                                           \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,  \
                   MPI_Request *req) {                                                            \
        SG_BEGIN(PMPI_##NAME(buf, count, dt, dest, tag, comm, req))                               \
        if (rc_ == MPI_SUCCESS)                                                                   \
            sg_req_post(*req, SG_DEP_SEND, dest, tag, sg_comm_index(comm), sg_bytes(count, dt),   \
                        PERSISTENT);                                                              \
        SG_END(SG_NOT_WAITING)                                                                    \
    }
ISEND_WRAPPER(Isend, 0)
ISEND_WRAPPER(Issend, 0)
ISEND_WRAPPER(Ibsend, 0)
ISEND_WRAPPER(Irsend, 0)
ISEND_WRAPPER(Send_init, 1)
ISEND_WRAPPER(Ssend_init, 1)
ISEND_WRAPPER(Bsend_init, 1)
ISEND_WRAPPER(Rsend_init, 1)

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Request *req) {
    SG_BEGIN(PMPI_Irecv(buf, count, dt, source, tag, comm, req))
    if (rc_ == MPI_SUCCESS)
        sg_req_post(*req, SG_DEP_RECV, source, tag, sg_comm_index(comm), 0, 0);
    SG_END(SG_NOT_WAITING)
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                  MPI_Request *req) {
    SG_BEGIN(PMPI_Recv_init(buf, count, dt, source, tag, comm, req))
    if (rc_ == MPI_SUCCESS)
        sg_req_post(*req, SG_DEP_RECV, source, tag, sg_comm_index(comm), 0, 1);
    SG_END(SG_NOT_WAITING)
}

int MPI_Start(MPI_Request *req) { SG_PLAIN(PMPI_Start(req), SG_NOT_WAITING) }
int MPI_Startall(int n, MPI_Request reqs[]) { SG_PLAIN(PMPI_Startall(n, reqs), SG_NOT_WAITING) }

int MPI_Request_free(MPI_Request *req) {
    MPI_Request saved = *req;
    SG_BEGIN(PMPI_Request_free(req))
    sg_req_forget(saved, v_);
    SG_END(SG_NOT_WAITING)
}

/* ---- completion ---- */
int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    MPI_Request saved = *req;
    MPI_Status local, *st = (status == MPI_STATUS_IGNORE) ? &local : status;
    SG_BEGIN(PMPI_Wait(req, st))
    if (rc_ == MPI_SUCCESS)
        sg_req_complete(saved, st, v_, dt_, dt_);
    SG_END(SG_WAITING)
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    MPI_Request saved = *req;
    MPI_Status local, *st = (status == MPI_STATUS_IGNORE) ? &local : status;
    SG_BEGIN(PMPI_Test(req, flag, st))
    SG_POLL_HIT(*flag)
    if (rc_ == MPI_SUCCESS && *flag)
        sg_req_complete(saved, st, v_, 0, 0);
    SG_END(SG_NOT_WAITING)
}

/* Copies of the request handles (the call overwrites them) and statuses the caller may have ignored.
 * Small arrays live on the stack; very large ones are the only malloc in the wrappers. */
enum { SCRATCH = 128 };
struct scratch {
    MPI_Request req_local[SCRATCH];
    MPI_Status st_local[SCRATCH];
    MPI_Request *reqs;
    MPI_Status *st;
};

static int scratch_open(struct scratch *s, int n, const MPI_Request *reqs, MPI_Status *statuses) {
    if (n < 0)
        return 0;
    s->reqs = n <= SCRATCH ? s->req_local : malloc(sizeof(MPI_Request) * (size_t)n);
    s->st = statuses != MPI_STATUSES_IGNORE ? statuses
            : n <= SCRATCH                  ? s->st_local
                                            : malloc(sizeof(MPI_Status) * (size_t)n);
    if (s->reqs == NULL || s->st == NULL)
        return 0;
    for (int i = 0; i < n; i++)
        s->reqs[i] = reqs[i];
    return 1;
}

static void scratch_close(struct scratch *s, MPI_Status *statuses) {
    if (s->reqs != NULL && s->reqs != s->req_local)
        free(s->reqs);
    if (s->st != NULL && s->st != s->st_local && s->st != statuses)
        free(s->st);
}

static void complete_many(const struct scratch *s, const int *idx, int n, uint32_t v, uint64_t dt) {
    uint64_t recv_share, send_share;
    sg_wait_shares(s->reqs, idx, n, dt, &recv_share, &send_share);
    for (int i = 0; i < n; i++)
        sg_req_complete(s->reqs[idx ? idx[i] : i], &s->st[i], v, recv_share, send_share);
}

#define MULTI_BEGIN(n, reqs, statuses, pmpi_call_original)                                      \
    if (sg_thread_self()->in_mpi)                                                                 \
        return pmpi_call_original;                                                                \
    struct scratch s = {0};                                                                       \
    if (!scratch_open(&s, n, reqs, statuses)) {                                                   \
        scratch_close(&s, statuses);                                                              \
        return pmpi_call_original;                                                                \
    }

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[]) {
    MULTI_BEGIN(n, reqs, statuses, PMPI_Waitall(n, reqs, statuses))
    SG_BEGIN(PMPI_Waitall(n, reqs, s.st))
    if (rc_ == MPI_SUCCESS)
        complete_many(&s, NULL, n, v_, dt_);
    scratch_close(&s, statuses);
    SG_END(SG_WAITING)
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
    MULTI_BEGIN(n, reqs, MPI_STATUSES_IGNORE, PMPI_Waitany(n, reqs, index, status))
    MPI_Status *st = (status == MPI_STATUS_IGNORE) ? &s.st[0] : status;
    SG_BEGIN(PMPI_Waitany(n, reqs, index, st))
    if (rc_ == MPI_SUCCESS && *index != MPI_UNDEFINED)
        sg_req_complete(s.reqs[*index], st, v_, dt_, dt_);
    scratch_close(&s, MPI_STATUSES_IGNORE);
    SG_END(SG_WAITING)
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    MULTI_BEGIN(n, reqs, statuses, PMPI_Waitsome(n, reqs, outcount, indices, statuses))
    SG_BEGIN(PMPI_Waitsome(n, reqs, outcount, indices, s.st))
    if (rc_ == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        complete_many(&s, indices, *outcount, v_, dt_);
    scratch_close(&s, statuses);
    SG_END(SG_WAITING)
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    MULTI_BEGIN(n, reqs, statuses, PMPI_Testall(n, reqs, flag, statuses))
    SG_BEGIN(PMPI_Testall(n, reqs, flag, s.st))
    SG_POLL_HIT(*flag)
    if (rc_ == MPI_SUCCESS && *flag)
        complete_many(&s, NULL, n, v_, 0);
    scratch_close(&s, statuses);
    SG_END(SG_NOT_WAITING)
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
    MULTI_BEGIN(n, reqs, MPI_STATUSES_IGNORE, PMPI_Testany(n, reqs, index, flag, status))
    MPI_Status *st = (status == MPI_STATUS_IGNORE) ? &s.st[0] : status;
    SG_BEGIN(PMPI_Testany(n, reqs, index, flag, st))
    SG_POLL_HIT(*flag && *index != MPI_UNDEFINED)
    if (rc_ == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED)
        sg_req_complete(s.reqs[*index], st, v_, 0, 0);
    scratch_close(&s, MPI_STATUSES_IGNORE);
    SG_END(SG_NOT_WAITING)
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    MULTI_BEGIN(n, reqs, statuses, PMPI_Testsome(n, reqs, outcount, indices, statuses))
    SG_BEGIN(PMPI_Testsome(n, reqs, outcount, indices, s.st))
    SG_POLL_HIT(*outcount != MPI_UNDEFINED && *outcount > 0)
    if (rc_ == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        complete_many(&s, indices, *outcount, v_, 0);
    scratch_close(&s, statuses);
    SG_END(SG_NOT_WAITING)
}
