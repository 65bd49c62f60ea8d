/* Communicator, request and window bookkeeping of the PMPI layer: fixed-size tables, no malloc on
 * the hot paths (a communicator's member list is built once, when it is first seen). */
#include "sg_mpi_state.h"
#include <stdlib.h>
#include <string.h>

enum { COMM_CACHE = 1024, REQ_SLOTS = 1 << 14, WIN_SLOTS = 256 };

static inline void lock(char *l) {
    while (__atomic_test_and_set(l, __ATOMIC_ACQUIRE))
        ;
}
static inline void unlock(char *l) { __atomic_clear(l, __ATOMIC_RELEASE); }

/* ---- communicators: live handle -> index in the core's comm table ---- */
static struct { MPI_Comm handle; int32_t idx; } comm_cache_[COMM_CACHE];
static int ncomm_cache_;
static char comm_lock_;

static int32_t comm_lookup(MPI_Comm c) {
    int32_t idx = -1;
    lock(&comm_lock_);
    for (int i = 0; i < ncomm_cache_; i++)
        if (comm_cache_[i].handle == c) {
            idx = comm_cache_[i].idx;
            break;
        }
    unlock(&comm_lock_);
    return idx;
}

void sg_comm_register(MPI_Comm c) {
    if (c == MPI_COMM_NULL || comm_lookup(c) >= 0)
        return;
    int inter = 0, n = 0;
    MPI_Group g, world;
    PMPI_Comm_test_inter(c, &inter);
    /* point-to-point ranks of an intercommunicator name the remote group */
    if ((inter ? PMPI_Comm_remote_group(c, &g) : PMPI_Comm_group(c, &g)) != MPI_SUCCESS)
        return;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_size(g, &n);
    int *ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *out = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int32_t idx = -1;
    if (ranks && out) {
        for (int i = 0; i < n; i++)
            ranks[i] = i;
        PMPI_Group_translate_ranks(g, n, ranks, world, out);
        for (int i = 0; i < n; i++)
            if (out[i] == MPI_UNDEFINED)
                out[i] = -1;
        idx = sg_comm_add(out, n);
    }
    free(ranks);
    free(out);
    PMPI_Group_free(&g);
    PMPI_Group_free(&world);
    if (idx < 0)
        return;
    lock(&comm_lock_);
    if (ncomm_cache_ < COMM_CACHE)
        comm_cache_[ncomm_cache_++] = (typeof(comm_cache_[0])){c, idx};
    unlock(&comm_lock_);
}

int32_t sg_comm_index(MPI_Comm c) {
    if (c == MPI_COMM_WORLD)
        return 0;
    int32_t idx = comm_lookup(c);
    if (idx < 0 && c != MPI_COMM_NULL) {
        sg_comm_register(c);
        idx = comm_lookup(c);
    }
    return idx;
}

void sg_comm_forget(MPI_Comm c) {
    lock(&comm_lock_);
    for (int i = 0; i < ncomm_cache_; i++)
        if (comm_cache_[i].handle == c) {
            comm_cache_[i] = comm_cache_[--ncomm_cache_];
            break;
        }
    unlock(&comm_lock_);
}

/* ---- windows -> communicator index ---- */
static struct { MPI_Win handle; int32_t comm_idx; } wins_[WIN_SLOTS];
static int nwins_;
static char win_lock_;

void sg_win_register(MPI_Win w, MPI_Comm c) {
    int32_t idx = sg_comm_index(c);
    lock(&win_lock_);
    if (nwins_ < WIN_SLOTS)
        wins_[nwins_++] = (typeof(wins_[0])){w, idx};
    unlock(&win_lock_);
}

int32_t sg_win_comm(MPI_Win w) {
    int32_t idx = -1;
    lock(&win_lock_);
    for (int i = 0; i < nwins_; i++)
        if (wins_[i].handle == w)
            idx = wins_[i].comm_idx;
    unlock(&win_lock_);
    return idx;
}

void sg_win_forget(MPI_Win w) {
    lock(&win_lock_);
    for (int i = 0; i < nwins_; i++)
        if (wins_[i].handle == w) {
            wins_[i] = wins_[--nwins_];
            break;
        }
    unlock(&win_lock_);
}

/* ---- requests: open addressing keyed by the handle's bits, backward-shift deletion ---- */
struct req_slot {
    uint64_t key;
    uint8_t used, kind, persistent;
    int32_t peer, tag, comm_idx;   /* peer/tag as posted (comm rank, may be a wildcard) */
    int64_t bytes;
    int64_t trace_id;              /* request id in the trace (trace mode) */
};
static struct req_slot reqs_[REQ_SLOTS];
static char req_lock_;

static inline uint64_t req_key(MPI_Request r) {
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}
static inline uint32_t home(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k & (REQ_SLOTS - 1);
}

static struct req_slot *req_find(uint64_t k) {
    for (uint32_t i = home(k), n = 0; n < REQ_SLOTS; i = (i + 1) & (REQ_SLOTS - 1), n++) {
        if (!reqs_[i].used)
            return NULL;
        if (reqs_[i].key == k)
            return &reqs_[i];
    }
    return NULL;
}

static void req_delete(struct req_slot *s) {
    uint32_t i = (uint32_t)(s - reqs_);
    for (uint32_t j = i;;) {
        j = (j + 1) & (REQ_SLOTS - 1);
        if (!reqs_[j].used)
            break;
        uint32_t h = home(reqs_[j].key);
        /* move j back to i unless its home lies cyclically in (i, j] */
        int stays = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
        if (stays)
            continue;
        reqs_[i] = reqs_[j];
        i = j;
    }
    reqs_[i].used = 0;
}

/* Always a new entry, even for a handle already in the table: MPICH hands out one shared handle for
 * requests that completed at once (e.g. eager sends), so handles are not unique; each completion of
 * that handle then takes one of its entries. */
void sg_req_post(MPI_Request r, int kind, int32_t peer, int32_t tag, int32_t comm_idx, int64_t bytes,
                 int persistent) {
    if (r == MPI_REQUEST_NULL)
        return;
    uint64_t k = req_key(r);
    /* persistent requests and non-blocking collectives appear in a trace as their calls only */
    int64_t id = (sg_trace_on && !persistent && kind != SG_DEP_COLL)
                     ? sg_trace_post(kind, peer, tag, comm_idx, bytes) : -1;
    lock(&req_lock_);
    uint32_t i = home(k), n = 0;
    while (reqs_[i].used && ++n < REQ_SLOTS / 2)
        i = (i + 1) & (REQ_SLOTS - 1);
    if (!reqs_[i].used)   /* a (nearly) full table forgets the request: its dependence is lost */
        reqs_[i] = (struct req_slot){k, 1, (uint8_t)kind, (uint8_t)persistent, peer, tag, comm_idx, bytes, id};
    unlock(&req_lock_);
}

int sg_req_kind(MPI_Request r) {
    if (r == MPI_REQUEST_NULL)
        return -1;
    lock(&req_lock_);
    struct req_slot *s = req_find(req_key(r));
    int kind = s ? s->kind : -1;
    unlock(&req_lock_);
    return kind;
}

void sg_wait_shares(const MPI_Request *reqs, const int *idx, int n, uint64_t dt, uint64_t *recv_share,
                    uint64_t *send_share) {
    int receives = 0, sends = 0;
    for (int i = 0; i < n; i++) {
        int kind = sg_req_kind(reqs[idx ? idx[i] : i]);
        receives += kind == SG_DEP_RECV || kind == SG_DEP_COLL;
        sends += kind == SG_DEP_SEND;
    }
    *recv_share = receives ? dt / (uint64_t)receives : 0;
    *send_share = (!receives && sends) ? dt / (uint64_t)sends : 0;
}

int sg_req_complete(MPI_Request r, const MPI_Status *st, uint32_t vertex, uint64_t recv_wait_ns,
                    uint64_t send_wait_ns) {
    if (r == MPI_REQUEST_NULL)
        return 0;
    lock(&req_lock_);
    struct req_slot *s = req_find(req_key(r));
    if (s == NULL) {
        unlock(&req_lock_);
        return 0;
    }
    struct req_slot q = *s;
    if (!q.persistent)
        req_delete(s);
    unlock(&req_lock_);
    uint64_t wait_ns = q.kind == SG_DEP_SEND ? send_wait_ns : recv_wait_ns;

    struct sg_thread *t = sg_thread_self();
    int take = sg_take_dep(t);
    if (!take && q.trace_id < 0)
        return 1;
    int32_t cid = sg_comm_id(q.comm_idx);
    if (q.kind == SG_DEP_COLL) {
        sg_record_dep(vertex, SG_DEP_COLL, -1, -1, cid, q.bytes, wait_ns);
        return 1;
    }
    int32_t peer = q.peer, tag = q.tag;
    int64_t bytes = q.bytes;
    if (q.kind == SG_DEP_RECV && st != NULL) {
        int cancelled = 0;
        PMPI_Test_cancelled(st, &cancelled);
        if (cancelled) {
            if (q.trace_id >= 0)
                sg_trace_event(t, SG_TEV_REQUEST_CANCELLED, -1, 0, -1, 0, q.trace_id);
            return 1;
        }
        if (peer == MPI_ANY_SOURCE)
            peer = st->MPI_SOURCE;
        if (tag == MPI_ANY_TAG)
            tag = st->MPI_TAG;
        int n = 0;
        if (PMPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED)
            bytes = n;
    }
    if (peer == MPI_PROC_NULL)
        return 1;
    int32_t world = (peer == MPI_ANY_SOURCE) ? -1 : sg_comm_world_rank(q.comm_idx, peer);
    if (q.trace_id >= 0)
        sg_trace_event(t, q.kind == SG_DEP_SEND ? SG_TEV_ISEND_COMPLETE : SG_TEV_IRECV, world, tag, cid, bytes,
                       q.trace_id);
    if (!take)
        return 1;
    sg_record_dep(vertex, q.kind, world, tag, cid, bytes, wait_ns);
    return 1;
}

/* MPI_Request_free: a freed send still goes out, so its dependence is recorded where it was freed */
void sg_req_forget(MPI_Request r, uint32_t vertex) {
    lock(&req_lock_);
    struct req_slot *s = req_find(req_key(r));
    struct req_slot q = s ? *s : (struct req_slot){0};
    if (s)
        req_delete(s);
    unlock(&req_lock_);
    if (q.used && q.kind == SG_DEP_SEND && !q.persistent && q.peer != MPI_PROC_NULL &&
        sg_take_dep(sg_thread_self()))
        sg_record_dep(vertex, SG_DEP_SEND, sg_comm_world_rank(q.comm_idx, q.peer), q.tag,
                      sg_comm_id(q.comm_idx), q.bytes, 0);
}

/* ---- helpers for the wrappers ---- */
int64_t sg_bytes(int count, MPI_Datatype type) {
    int size = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;
    return (int64_t)count * size;
}

int sg_take_dep(struct sg_thread *t) {
    double p = sg_run.comm_sample;
    if (p >= 1.0)
        return 1;
    uint64_t x = t->rng ? t->rng : 0x2545F4914F6CDD1Dull;   /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t->rng = x;
    return (double)(x >> 11) * (1.0 / 9007199254740992.0) < p;
}

void sg_p2p_dep(struct sg_thread *t, uint32_t v, int kind, int peer, int tag, MPI_Comm comm,
                int64_t bytes, const MPI_Status *st, uint64_t wait_ns) {
    if (peer == MPI_PROC_NULL || (!sg_trace_on && !sg_take_dep(t)))
        return;
    if (kind == SG_DEP_RECV && st != NULL) {
        if (peer == MPI_ANY_SOURCE)
            peer = st->MPI_SOURCE;
        if (tag == MPI_ANY_TAG)
            tag = st->MPI_TAG;
        int n = 0;
        if (PMPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED)
            bytes = n;
    }
    int32_t idx = sg_comm_index(comm);
    int32_t world = (peer == MPI_ANY_SOURCE) ? -1 : sg_comm_world_rank(idx, peer);
    if (sg_trace_on) {   /* every message is traced; the dependence table may still sample */
        sg_trace_event(t, kind == SG_DEP_SEND ? SG_TEV_SEND : SG_TEV_RECV, world, tag, sg_comm_id(idx), bytes, -1);
        if (!sg_take_dep(t))
            return;
    }
    sg_record_dep(v, kind, world, tag, sg_comm_id(idx), bytes, wait_ns);
}

void sg_coll_dep(struct sg_thread *t, uint32_t v, MPI_Comm comm, int64_t bytes, uint64_t wait_ns) {
    if (sg_trace_on)
        sg_trace_coll(t, comm, bytes);
    if (!sg_take_dep(t))
        return;
    sg_record_dep(v, SG_DEP_COLL, -1, -1, sg_comm_id(sg_comm_index(comm)), bytes, wait_ns);
}
