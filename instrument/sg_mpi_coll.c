/* PMPI wrappers: collectives and their non-blocking forms.
 * One COLL row per (vertex, communicator); `bytes` is what this rank contributes (its send side;
 * for Scatter(v) what it receives, and for an MPI_IN_PLACE send buffer the receive side).
 * A non-blocking collective counts its call at the post and records its row at the completing
 * Wait/Test, like point-to-point requests. */
#include "sg_mpi_state.h"

static int comm_size(MPI_Comm c) {
    int n = 0;
    PMPI_Comm_size(c, &n);
    return n;
}

static int64_t sum_bytes(const int counts[], MPI_Datatype dt, int n) {
    int64_t total = 0;
    for (int i = 0; counts != NULL && i < n; i++)
        total += counts[i];
    return total * sg_bytes(1, dt);
}

static int64_t sum_bytes_w(const int counts[], const MPI_Datatype types[], int n) {
    int64_t total = 0;
    for (int i = 0; counts != NULL && types != NULL && i < n; i++)
        total += sg_bytes(counts[i], types[i]);
    return total;
}

#define SEND_OR_RECV(sbuf, scount, stype, rcount, rtype)                                          \
    ((sbuf) == MPI_IN_PLACE ? sg_bytes(rcount, rtype) : sg_bytes(scount, stype))

#define WITH_REQ(...) (__VA_ARGS__, MPI_Request *req)
#define WITH_REQ_ARG(...) (__VA_ARGS__, req)

/* trace mode: the root of a rooted collective and which way its data flows (sg_trace_mpi.c) */
#define NO_ROOT
#define ROOT_IS(SHAPE)                                                                            \
    if (sg_trace_on)                                                                              \
        sg_trace_coll_root(t_, root, SHAPE);

/* the blocking form and its I-form from one description */
#define COLLECTIVE(NAME, INAME, PARAMS, ARGS, BYTES, TRACE_ROOT)                                  \
    int MPI_##NAME PARAMS {                                                                       \
        SG_BEGIN(PMPI_##NAME ARGS)                                                                \
        TRACE_ROOT                                                                                \
        if (rc_ == MPI_SUCCESS)                                                                   \
            sg_coll_dep(t_, v_, comm, BYTES, dt_);                                                \
        SG_END(SG_WAITING)                                                                        \
    }                                                                                             \
    int MPI_##INAME WITH_REQ PARAMS {                                                             \
        SG_BEGIN(PMPI_##INAME WITH_REQ_ARG ARGS)                                                  \
        if (rc_ == MPI_SUCCESS)                                                                   \
            sg_req_post(*req, SG_DEP_COLL, -1, -1, sg_comm_index(comm), BYTES, 0);                \
        SG_END(SG_NOT_WAITING)                                                                    \
    }

int MPI_Barrier(MPI_Comm comm) {
    SG_BEGIN(PMPI_Barrier(comm))
    if (rc_ == MPI_SUCCESS)
        sg_coll_dep(t_, v_, comm, 0, dt_);
    SG_END(SG_WAITING)
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
    SG_BEGIN(PMPI_Ibarrier(comm, req))
    if (rc_ == MPI_SUCCESS)
        sg_req_post(*req, SG_DEP_COLL, -1, -1, sg_comm_index(comm), 0, 0);
    SG_END(SG_NOT_WAITING)
}

COLLECTIVE(Bcast, Ibcast, (void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm),
           (buf, count, dt, root, comm), sg_bytes(count, dt), ROOT_IS(SG_COLL_1TON))
COLLECTIVE(Reduce, Ireduce,
           (const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm),
           (sbuf, rbuf, count, dt, op, root, comm), sg_bytes(count, dt), ROOT_IS(SG_COLL_NTO1))
COLLECTIVE(Allreduce, Iallreduce, (const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
           (sbuf, rbuf, count, dt, op, comm), sg_bytes(count, dt), NO_ROOT)
COLLECTIVE(Scan, Iscan, (const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
           (sbuf, rbuf, count, dt, op, comm), sg_bytes(count, dt), NO_ROOT)
COLLECTIVE(Exscan, Iexscan, (const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
           (sbuf, rbuf, count, dt, op, comm), sg_bytes(count, dt), NO_ROOT)
COLLECTIVE(Gather, Igather,
           (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
            int root, MPI_Comm comm),
           (sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
           SEND_OR_RECV(sbuf, scount, stype, rcount, rtype), ROOT_IS(SG_COLL_NTO1))
COLLECTIVE(Gatherv, Igatherv,
           (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
            const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm),
           (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm),
           sbuf == MPI_IN_PLACE ? 0 : sg_bytes(scount, stype), ROOT_IS(SG_COLL_NTO1))
COLLECTIVE(Scatter, Iscatter,
           (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
            int root, MPI_Comm comm),
           (sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
           rbuf == MPI_IN_PLACE ? sg_bytes(scount, stype) : sg_bytes(rcount, rtype), ROOT_IS(SG_COLL_1TON))
COLLECTIVE(Scatterv, Iscatterv,
           (const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf,
            int rcount, MPI_Datatype rtype, int root, MPI_Comm comm),
           (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm),
           rbuf == MPI_IN_PLACE ? 0 : sg_bytes(rcount, rtype), ROOT_IS(SG_COLL_1TON))
COLLECTIVE(Allgather, Iallgather,
           (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
            MPI_Comm comm),
           (sbuf, scount, stype, rbuf, rcount, rtype, comm), SEND_OR_RECV(sbuf, scount, stype, rcount, rtype), NO_ROOT)
COLLECTIVE(Allgatherv, Iallgatherv,
           (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
            const int displs[], MPI_Datatype rtype, MPI_Comm comm),
           (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm),
           sbuf == MPI_IN_PLACE ? 0 : sg_bytes(scount, stype), NO_ROOT)
COLLECTIVE(Alltoall, Ialltoall,
           (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
            MPI_Comm comm),
           (sbuf, scount, stype, rbuf, rcount, rtype, comm),
           SEND_OR_RECV(sbuf, scount, stype, rcount, rtype) * comm_size(comm), NO_ROOT)
COLLECTIVE(Alltoallv, Ialltoallv,
           (const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
            const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm),
           (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm),
           sbuf == MPI_IN_PLACE ? sum_bytes(rcounts, rtype, comm_size(comm))
                                : sum_bytes(scounts, stype, comm_size(comm)), NO_ROOT)
COLLECTIVE(Alltoallw, Ialltoallw,
           (const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[],
            void *rbuf, const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm),
           (sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm),
           sbuf == MPI_IN_PLACE ? sum_bytes_w(rcounts, rtypes, comm_size(comm))
                                : sum_bytes_w(scounts, stypes, comm_size(comm)), NO_ROOT)
COLLECTIVE(Reduce_scatter, Ireduce_scatter,
           (const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
           (sbuf, rbuf, rcounts, dt, op, comm), sum_bytes(rcounts, dt, comm_size(comm)), NO_ROOT)
COLLECTIVE(Reduce_scatter_block, Ireduce_scatter_block,
           (const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
           (sbuf, rbuf, rcount, dt, op, comm), sg_bytes(rcount, dt) * comm_size(comm), NO_ROOT)
