/* Fortran symbols (mpi_send_ ...): Open MPI's Fortran bindings call PMPI directly, so the C wrappers
 * never see Fortran calls there. Each wrapper times the call, records what the C wrapper would, and
 * calls the MPI library's own Fortran PMPI symbol (weak: an MPI without Fortran bindings has none,
 * and then no Fortran program can call these either). MPICH's pmpi_*_ call MPI_* in C, which the
 * re-entrancy guard turns into plain PMPI calls, so nothing is counted twice. */
#include "sg_mpi_state.h"
#include <stdio.h>
#include <stdlib.h>

typedef MPI_Fint F;

/* Words of a Fortran status (Fortran's MPI_STATUS_SIZE).  MPI-4 headers name it MPI_F_STATUS_SIZE;
 * MPI-3.1 headers (Open MPI 4.x) do not, and there the Fortran status is the C status stored as
 * MPI_Fint words: Open MPI's configure sets MPI_STATUS_SIZE to sizeof(MPI_Status)/sizeof(MPI_Fint). */
#ifdef MPI_F_STATUS_SIZE
#define SG_F_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define SG_F_STATUS_SIZE ((int)((sizeof(MPI_Status) + sizeof(MPI_Fint) - 1) / sizeof(MPI_Fint)))
#endif

#define WEAK __attribute__((weak))
void pmpi_init_(F *ierr) WEAK;
void pmpi_init_thread_(F *required, F *provided, F *ierr) WEAK;
void pmpi_finalize_(F *ierr) WEAK;
void pmpi_send_(const void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr) WEAK;
void pmpi_recv_(void *buf, F *count, F *dt, F *source, F *tag, F *comm, F *status, F *ierr) WEAK;
void pmpi_isend_(const void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *req, F *ierr) WEAK;
void pmpi_irecv_(void *buf, F *count, F *dt, F *source, F *tag, F *comm, F *req, F *ierr) WEAK;
void pmpi_wait_(F *req, F *status, F *ierr) WEAK;
void pmpi_waitall_(F *n, F *reqs, F *statuses, F *ierr) WEAK;
void pmpi_barrier_(F *comm, F *ierr) WEAK;
void pmpi_bcast_(void *buf, F *count, F *dt, F *root, F *comm, F *ierr) WEAK;
void pmpi_reduce_(const void *sbuf, void *rbuf, F *count, F *dt, F *op, F *root, F *comm, F *ierr) WEAK;
void pmpi_allreduce_(const void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr) WEAK;
void pmpi_ssend_(const void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr) WEAK;
void pmpi_sendrecv_(const void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount, F *rtype,
                    F *source, F *rtag, F *comm, F *status, F *ierr) WEAK;
void pmpi_probe_(F *source, F *tag, F *comm, F *status, F *ierr) WEAK;
void pmpi_iprobe_(F *source, F *tag, F *comm, F *flag, F *status, F *ierr) WEAK;
void pmpi_test_(F *req, F *flag, F *status, F *ierr) WEAK;
void pmpi_testall_(F *n, F *reqs, F *flag, F *statuses, F *ierr) WEAK;
void pmpi_waitany_(F *n, F *reqs, F *index, F *status, F *ierr) WEAK;
void pmpi_gather_(const void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root, F *comm,
                  F *ierr) WEAK;
void pmpi_scatter_(const void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root, F *comm,
                   F *ierr) WEAK;
void pmpi_allgather_(const void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm,
                     F *ierr) WEAK;
void pmpi_alltoall_(const void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm,
                    F *ierr) WEAK;
void pmpi_comm_split_(F *comm, F *color, F *key, F *newcomm, F *ierr) WEAK;
void pmpi_comm_dup_(F *comm, F *newcomm, F *ierr) WEAK;
void pmpi_comm_free_(F *comm, F *ierr) WEAK;
void pmpi_abort_(F *comm, F *errorcode, F *ierr) WEAK;

static void missing(const char *name) {
    fprintf(stderr, "scalgraph: %s called but this MPI has no Fortran PMPI symbol for it\n", name);
    abort();
}
#define NEED(sym) if (sym == NULL) missing(#sym)

/* a C status from a Fortran one; `local` stands in when the program passed MPI_STATUS_IGNORE */
static F *fstatus(F *status, F *local) { return status == MPI_F_STATUS_IGNORE ? local : status; }
static void to_c_status(const F *fst, MPI_Status *cst) { PMPI_Status_f2c(fst, cst); }

/* `cname` is the C name (MPI_Send): a trace names the call as the C wrapper would, so analyses that
 * know MPI by its C names see Fortran programs alike */
#define F_BEGIN(cname, pmpi_call)                                                                 \
    struct sg_thread *t_ = sg_thread_self();                                                      \
    if (t_->in_mpi) {                                                                             \
        pmpi_call;                                                                                \
        return;                                                                                   \
    }                                                                                             \
    t_->in_mpi = 1;                                                                               \
    uint32_t v_ = sg_vertex_of(t_);                                                               \
    uint64_t t0_;                                                                                 \
    uint64_t c0_ = sg_mpi_enter(t_, &t0_);                                                        \
    pmpi_call;                                                                                    \
    uint64_t dt_ = sg_now_ns() - t0_;                                                             \
    (void)dt_;                                                                                    \
    static int32_t sg_rid_ = -1;   /* this wrapper's region in the trace */                       \
    if (sg_trace_on)                                                                              \
        sg_trace_mpi_enter(t_, &sg_rid_, cname, v_, t0_, t0_ + dt_);

#define F_END(waiting)                                                                            \
    if (sg_trace_on)                                                                              \
        sg_trace_mpi_exit(t_);                                                                    \
    sg_mpi_leave(t_, v_, t0_, dt_, c0_, waiting);                                                 \
    t_->in_mpi = 0;

/* trace mode: a rooted collective names its root and which way its data flows (sg_trace_mpi.c) */
#define F_ROOT_IS(SHAPE)                                                                          \
    if (sg_trace_on)                                                                              \
        sg_trace_coll_root(t_, *root, SHAPE);

void mpi_init_(F *ierr) {
    NEED(pmpi_init_);
    F_BEGIN("MPI_Init", pmpi_init_(ierr))
    if (*ierr == MPI_SUCCESS)
        sg_mpi_after_init();
    F_END(SG_NOT_WAITING)
}

void mpi_init_thread_(F *required, F *provided, F *ierr) {
    NEED(pmpi_init_thread_);
    F_BEGIN("MPI_Init_thread", pmpi_init_thread_(required, provided, ierr))
    if (*ierr == MPI_SUCCESS)
        sg_mpi_after_init();
    F_END(SG_NOT_WAITING)
}

void mpi_finalize_(F *ierr) {
    NEED(pmpi_finalize_);
    struct sg_thread *t = sg_thread_self();
    if (t->in_mpi) {
        pmpi_finalize_(ierr);
        return;
    }
    t->in_mpi = 1;
    uint32_t v = sg_vertex_of(t);
    uint64_t t0 = sg_now_ns();   /* for the trace */
    sg_mpi_before_finalize(v);
    pmpi_finalize_(ierr);
    if (sg_trace_on)   /* as MPI_Finalize: the trace's last EXIT, then the file is closed */
        sg_trace_finalize(t, v, t0);
    t->in_mpi = 0;
}

void mpi_send_(const void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr) {
    NEED(pmpi_send_);
    F_BEGIN("MPI_Send", pmpi_send_(buf, count, dt, dest, tag, comm, ierr))
    sg_p2p_dep(t_, v_, SG_DEP_SEND, *dest, *tag, PMPI_Comm_f2c(*comm),
               sg_bytes(*count, PMPI_Type_f2c(*dt)), NULL, 0);
    F_END(SG_WAITING)
}

void mpi_recv_(void *buf, F *count, F *dt, F *source, F *tag, F *comm, F *status, F *ierr) {
    NEED(pmpi_recv_);
    F local[SG_F_STATUS_SIZE];
    F *st = fstatus(status, local);
    F_BEGIN("MPI_Recv", pmpi_recv_(buf, count, dt, source, tag, comm, st, ierr))
    if (*ierr == MPI_SUCCESS) {
        MPI_Status cst;
        to_c_status(st, &cst);
        sg_p2p_dep(t_, v_, SG_DEP_RECV, *source, *tag, PMPI_Comm_f2c(*comm), 0, &cst, dt_);
    }
    F_END(SG_WAITING)
}

void mpi_isend_(const void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *req, F *ierr) {
    NEED(pmpi_isend_);
    F_BEGIN("MPI_Isend", pmpi_isend_(buf, count, dt, dest, tag, comm, req, ierr))
    if (*ierr == MPI_SUCCESS)
        sg_req_post(PMPI_Request_f2c(*req), SG_DEP_SEND, *dest, *tag, sg_comm_index(PMPI_Comm_f2c(*comm)),
                    sg_bytes(*count, PMPI_Type_f2c(*dt)), 0);
    F_END(SG_NOT_WAITING)
}

void mpi_irecv_(void *buf, F *count, F *dt, F *source, F *tag, F *comm, F *req, F *ierr) {
    NEED(pmpi_irecv_);
    F_BEGIN("MPI_Irecv", pmpi_irecv_(buf, count, dt, source, tag, comm, req, ierr))
    if (*ierr == MPI_SUCCESS)
        sg_req_post(PMPI_Request_f2c(*req), SG_DEP_RECV, *source, *tag,
                    sg_comm_index(PMPI_Comm_f2c(*comm)), 0, 0);
    F_END(SG_NOT_WAITING)
}

void mpi_wait_(F *req, F *status, F *ierr) {
    NEED(pmpi_wait_);
    MPI_Request saved = PMPI_Request_f2c(*req);
    F local[SG_F_STATUS_SIZE];
    F *st = fstatus(status, local);
    F_BEGIN("MPI_Wait", pmpi_wait_(req, st, ierr))
    if (*ierr == MPI_SUCCESS) {
        MPI_Status cst;
        to_c_status(st, &cst);
        sg_req_complete(saved, &cst, v_, dt_, dt_);
    }
    F_END(SG_WAITING)
}

/* Array calls (Waitall, Testall, Waitany): copies of the request handles, which the call overwrites.
 * Arrays longer than MAXF, and calls from inside MPI, pass straight through: timed by nobody, still
 * correct.  Returns the count, or -1 for a pass-through. */
enum { MAXF = 128 };
static int save_requests(const F *n, const F *reqs, MPI_Request saved[MAXF]) {
    int count = *n;
    if (count > MAXF || count < 0 || sg_thread_self()->in_mpi)
        return -1;
    for (int i = 0; i < count; i++)
        saved[i] = PMPI_Request_f2c(reqs[i]);
    return count;
}

/* declares `saved` (the copies) and `count`; a pass-through makes `pmpi_call` and returns */
#define F_SAVE_REQUESTS(n, reqs, pmpi_call)                                                       \
    MPI_Request saved[MAXF];                                                                      \
    int count = save_requests(n, reqs, saved);                                                    \
    if (count < 0) {                                                                              \
        pmpi_call;                                                                                \
        return;                                                                                   \
    }

/* the Fortran statuses to pass: `local` stands in when the program passed MPI_STATUSES_IGNORE */
static F *fstatuses(F *statuses, F *local) { return statuses == MPI_F_STATUSES_IGNORE ? local : statuses; }

/* records every request of a completed array call; `dt` is the time spent waiting (0 for a test) */
static void complete_all(const MPI_Request *saved, const F *st, int count, uint32_t v, uint64_t dt) {
    uint64_t recv_share, send_share;
    sg_wait_shares(saved, NULL, count, dt, &recv_share, &send_share);
    for (int i = 0; i < count; i++) {
        MPI_Status cst;
        to_c_status(&st[i * SG_F_STATUS_SIZE], &cst);
        sg_req_complete(saved[i], &cst, v, recv_share, send_share);
    }
}

void mpi_waitall_(F *n, F *reqs, F *statuses, F *ierr) {
    NEED(pmpi_waitall_);
    F_SAVE_REQUESTS(n, reqs, pmpi_waitall_(n, reqs, statuses, ierr))
    F local[MAXF * SG_F_STATUS_SIZE];
    F *st = fstatuses(statuses, local);
    F_BEGIN("MPI_Waitall", pmpi_waitall_(n, reqs, st, ierr))
    if (*ierr == MPI_SUCCESS)
        complete_all(saved, st, count, v_, dt_);
    F_END(SG_WAITING)
}

void mpi_barrier_(F *comm, F *ierr) {
    NEED(pmpi_barrier_);
    F_BEGIN("MPI_Barrier", pmpi_barrier_(comm, ierr))
    sg_coll_dep(t_, v_, PMPI_Comm_f2c(*comm), 0, dt_);
    F_END(SG_WAITING)
}

void mpi_bcast_(void *buf, F *count, F *dt, F *root, F *comm, F *ierr) {
    NEED(pmpi_bcast_);
    F_BEGIN("MPI_Bcast", pmpi_bcast_(buf, count, dt, root, comm, ierr))
    F_ROOT_IS(SG_COLL_1TON)
    sg_coll_dep(t_, v_, PMPI_Comm_f2c(*comm), sg_bytes(*count, PMPI_Type_f2c(*dt)), dt_);
    F_END(SG_WAITING)
}

void mpi_reduce_(const void *sbuf, void *rbuf, F *count, F *dt, F *op, F *root, F *comm, F *ierr) {
    NEED(pmpi_reduce_);
    F_BEGIN("MPI_Reduce", pmpi_reduce_(sbuf, rbuf, count, dt, op, root, comm, ierr))
    F_ROOT_IS(SG_COLL_NTO1)
    sg_coll_dep(t_, v_, PMPI_Comm_f2c(*comm), sg_bytes(*count, PMPI_Type_f2c(*dt)), dt_);
    F_END(SG_WAITING)
}

void mpi_allreduce_(const void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr) {
    NEED(pmpi_allreduce_);
    F_BEGIN("MPI_Allreduce", pmpi_allreduce_(sbuf, rbuf, count, dt, op, comm, ierr))
    sg_coll_dep(t_, v_, PMPI_Comm_f2c(*comm), sg_bytes(*count, PMPI_Type_f2c(*dt)), dt_);
    F_END(SG_WAITING)
}

void mpi_ssend_(const void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr) {
    NEED(pmpi_ssend_);
    F_BEGIN("MPI_Ssend", pmpi_ssend_(buf, count, dt, dest, tag, comm, ierr))
    sg_p2p_dep(t_, v_, SG_DEP_SEND, *dest, *tag, PMPI_Comm_f2c(*comm),
               sg_bytes(*count, PMPI_Type_f2c(*dt)), NULL, 0);
    F_END(SG_WAITING)
}

void mpi_sendrecv_(const void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount, F *rtype,
                   F *source, F *rtag, F *comm, F *status, F *ierr) {
    NEED(pmpi_sendrecv_);
    F local[SG_F_STATUS_SIZE];
    F *st = fstatus(status, local);
    F_BEGIN("MPI_Sendrecv",
            pmpi_sendrecv_(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st, ierr))
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    sg_p2p_dep(t_, v_, SG_DEP_SEND, *dest, *stag, c, sg_bytes(*scount, PMPI_Type_f2c(*stype)), NULL, 0);
    if (*ierr == MPI_SUCCESS) {
        MPI_Status cst;
        to_c_status(st, &cst);
        sg_p2p_dep(t_, v_, SG_DEP_RECV, *source, *rtag, c, 0, &cst, dt_);
    }
    F_END(SG_WAITING)
}

void mpi_probe_(F *source, F *tag, F *comm, F *status, F *ierr) {
    NEED(pmpi_probe_);
    F_BEGIN("MPI_Probe", pmpi_probe_(source, tag, comm, status, ierr))
    F_END(SG_WAITING)
}

/* a Fortran LOGICAL is true when non-zero (gfortran and flang write 1, some compilers -1) */
void mpi_iprobe_(F *source, F *tag, F *comm, F *flag, F *status, F *ierr) {
    NEED(pmpi_iprobe_);
    F_BEGIN("MPI_Iprobe", pmpi_iprobe_(source, tag, comm, flag, status, ierr))
    if (sg_trace_on && *ierr == MPI_SUCCESS && *flag)   /* a poll that found something is recorded */
        sg_trace_poll_hit(t_);
    F_END(SG_NOT_WAITING)
}

void mpi_test_(F *req, F *flag, F *status, F *ierr) {
    NEED(pmpi_test_);
    MPI_Request saved = PMPI_Request_f2c(*req);
    F local[SG_F_STATUS_SIZE];
    F *st = fstatus(status, local);
    F_BEGIN("MPI_Test", pmpi_test_(req, flag, st, ierr))
    if (sg_trace_on && *ierr == MPI_SUCCESS && *flag)   /* as MPI_Test in C (SG_POLL_HIT) */
        sg_trace_poll_hit(t_);
    if (*ierr == MPI_SUCCESS && *flag) {
        MPI_Status cst;
        to_c_status(st, &cst);
        sg_req_complete(saved, &cst, v_, 0, 0);
    }
    F_END(SG_NOT_WAITING)
}

/* as MPI_Testall in C: a polling loop's completing call records its messages (TeaLeaf's halo
   exchange completes with MPI_TESTALL; without it the trace had unmatched messages) */
void mpi_testall_(F *n, F *reqs, F *flag, F *statuses, F *ierr) {
    NEED(pmpi_testall_);
    F_SAVE_REQUESTS(n, reqs, pmpi_testall_(n, reqs, flag, statuses, ierr))
    F local[MAXF * SG_F_STATUS_SIZE];
    F *st = fstatuses(statuses, local);
    F_BEGIN("MPI_Testall", pmpi_testall_(n, reqs, flag, st, ierr))
    if (sg_trace_on && *ierr == MPI_SUCCESS && *flag)
        sg_trace_poll_hit(t_);
    if (*ierr == MPI_SUCCESS && *flag)
        complete_all(saved, st, count, v_, 0);
    F_END(SG_NOT_WAITING)
}

void mpi_waitany_(F *n, F *reqs, F *index, F *status, F *ierr) {
    NEED(pmpi_waitany_);
    F_SAVE_REQUESTS(n, reqs, pmpi_waitany_(n, reqs, index, status, ierr))
    F local[SG_F_STATUS_SIZE];
    F *st = fstatus(status, local);
    F_BEGIN("MPI_Waitany", pmpi_waitany_(n, reqs, index, st, ierr))
    if (*ierr == MPI_SUCCESS && *index != MPI_UNDEFINED && *index >= 1 && *index <= count) {
        MPI_Status cst;   /* Fortran indices start at 1 */
        to_c_status(st, &cst);
        sg_req_complete(saved[*index - 1], &cst, v_, dt_, dt_);
    }
    F_END(SG_WAITING)
}

#define F_ROOTED(name, cname, SHAPE, BYTES)                                                \
    void mpi_##name##_(const void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root, \
                       F *comm, F *ierr) {                                                        \
        NEED(pmpi_##name##_);                                                                     \
        F_BEGIN(cname, pmpi_##name##_(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr)) \
        F_ROOT_IS(SHAPE)                                                                          \
        sg_coll_dep(t_, v_, PMPI_Comm_f2c(*comm), BYTES, dt_);                                     \
        F_END(SG_WAITING)                                                                         \
    }
F_ROOTED(gather, "MPI_Gather", SG_COLL_NTO1, sg_bytes(*scount, PMPI_Type_f2c(*stype)))
F_ROOTED(scatter, "MPI_Scatter", SG_COLL_1TON, sg_bytes(*rcount, PMPI_Type_f2c(*rtype)))

void mpi_allgather_(const void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *ierr) {
    NEED(pmpi_allgather_);
    F_BEGIN("MPI_Allgather", pmpi_allgather_(sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr))
    sg_coll_dep(t_, v_, PMPI_Comm_f2c(*comm), sg_bytes(*scount, PMPI_Type_f2c(*stype)), dt_);
    F_END(SG_WAITING)
}

void mpi_alltoall_(const void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *ierr) {
    NEED(pmpi_alltoall_);
    F_BEGIN("MPI_Alltoall", pmpi_alltoall_(sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr))
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int n = 0;
    PMPI_Comm_size(c, &n);
    sg_coll_dep(t_, v_, c, sg_bytes(*scount, PMPI_Type_f2c(*stype)) * n, dt_);
    F_END(SG_WAITING)
}

void mpi_comm_split_(F *comm, F *color, F *key, F *newcomm, F *ierr) {
    NEED(pmpi_comm_split_);
    F_BEGIN("MPI_Comm_split", pmpi_comm_split_(comm, color, key, newcomm, ierr))
    if (*ierr == MPI_SUCCESS)
        sg_comm_register(PMPI_Comm_f2c(*newcomm));
    F_END(SG_WAITING)
}

void mpi_comm_dup_(F *comm, F *newcomm, F *ierr) {
    NEED(pmpi_comm_dup_);
    F_BEGIN("MPI_Comm_dup", pmpi_comm_dup_(comm, newcomm, ierr))
    if (*ierr == MPI_SUCCESS)
        sg_comm_register(PMPI_Comm_f2c(*newcomm));
    F_END(SG_WAITING)
}

void mpi_comm_free_(F *comm, F *ierr) {
    NEED(pmpi_comm_free_);
    MPI_Comm saved = PMPI_Comm_f2c(*comm);
    F_BEGIN("MPI_Comm_free", pmpi_comm_free_(comm, ierr))
    if (*ierr == MPI_SUCCESS)
        sg_comm_forget(saved);
    F_END(SG_NOT_WAITING)
}

void mpi_abort_(F *comm, F *errorcode, F *ierr) {
    NEED(pmpi_abort_);
    struct sg_thread *t = sg_thread_self();
    if (!t->in_mpi && sg_run.initialized && !sg_run.written) {
        uint64_t t0, c0 = sg_mpi_enter(t, &t0);
        sg_mpi_leave(t, sg_vertex_of(t), t0, 0, c0, SG_NOT_WAITING);
        sg_sampler_stop();
        sg_write_profile(NULL, SG_FLAG_ABORT);
    }
    t->in_mpi = 1;
    pmpi_abort_(comm, errorcode, ierr);
}
