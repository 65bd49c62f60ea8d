/* Fast OTF2 event reading for scalgraph/io/trace_otf2.py.
 *
 * libotf2's local event reader calls these C callbacks, which store one event per record straight
 * into the trace's numpy event array, so no Python code runs per event.  libotf2's
 * symbols come from the `otf2` wheel's extension module, which the caller loads RTLD_GLOBAL before
 * this library; the prototypes below are OTF2 3.x's public C API (OTF2_EvtReaderCallbacks.h),
 * declared here because the wheel ships no headers.  Built at first use with the C compiler
 * (scalgraph/io/otf2_native.py). */
#include <stddef.h>
#include <stdint.h>

typedef struct OTF2_Reader OTF2_Reader;
typedef struct OTF2_EvtReader OTF2_EvtReader;
typedef struct OTF2_EvtReaderCallbacks OTF2_EvtReaderCallbacks;
typedef struct OTF2_AttributeList OTF2_AttributeList;
typedef int OTF2_ErrorCode;
typedef int OTF2_CallbackCode;      /* OTF2_CALLBACK_SUCCESS = 0, OTF2_CALLBACK_INTERRUPT = 1 */

#define HEAD uint64_t loc, uint64_t t, uint64_t pos, void *ud, OTF2_AttributeList *al
typedef OTF2_CallbackCode (*cb_region)(HEAD, uint32_t region);
typedef OTF2_CallbackCode (*cb_p2p)(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len);
typedef OTF2_CallbackCode (*cb_ip2p)(HEAD, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len, uint64_t req);
typedef OTF2_CallbackCode (*cb_req)(HEAD, uint64_t req);
typedef OTF2_CallbackCode (*cb_none)(HEAD);
typedef OTF2_CallbackCode (*cb_coll_end)(HEAD, uint8_t op, uint32_t comm, uint32_t root, uint64_t sent,
                                         uint64_t received);
typedef OTF2_CallbackCode (*cb_rma)(HEAD, uint32_t win, uint32_t remote, uint64_t bytes, uint64_t mid);
typedef OTF2_CallbackCode (*cb_atomic)(HEAD, uint32_t win, uint32_t remote, uint8_t type, uint64_t sent,
                                       uint64_t received, uint64_t mid);
typedef OTF2_CallbackCode (*cb_sync)(HEAD, uint32_t win, uint32_t remote, uint8_t type);
typedef OTF2_CallbackCode (*cb_lock)(HEAD, uint32_t win, uint32_t remote, uint64_t lock_id, uint8_t type);
typedef OTF2_CallbackCode (*cb_release)(HEAD, uint32_t win, uint32_t remote, uint64_t lock_id);
typedef OTF2_CallbackCode (*cb_program_begin)(HEAD, uint32_t name, uint32_t nargs, const uint32_t *args);
typedef OTF2_CallbackCode (*cb_program_end)(HEAD, int64_t status);
typedef OTF2_CallbackCode (*cb_thread_lock)(HEAD, uint8_t model, uint32_t lock_id, uint32_t order);
typedef OTF2_CallbackCode (*cb_thread_fork)(HEAD, uint8_t model, uint32_t threads);

OTF2_EvtReaderCallbacks *OTF2_EvtReaderCallbacks_New(void);
void OTF2_EvtReaderCallbacks_Delete(OTF2_EvtReaderCallbacks *);
#define SETTER(NAME, TYPE) OTF2_ErrorCode OTF2_EvtReaderCallbacks_Set##NAME##Callback(OTF2_EvtReaderCallbacks *, TYPE);
SETTER(Enter, cb_region)
SETTER(Leave, cb_region)
SETTER(MpiSend, cb_p2p)
SETTER(MpiRecv, cb_p2p)
SETTER(MpiIsend, cb_ip2p)
SETTER(MpiIrecv, cb_ip2p)
SETTER(MpiIsendComplete, cb_req)
SETTER(MpiIrecvRequest, cb_req)
SETTER(MpiRequestCancelled, cb_req)
SETTER(MpiCollectiveBegin, cb_none)
SETTER(MpiCollectiveEnd, cb_coll_end)
SETTER(RmaPut, cb_rma)
SETTER(RmaGet, cb_rma)
SETTER(RmaAtomic, cb_atomic)
SETTER(RmaSync, cb_sync)
SETTER(RmaRequestLock, cb_lock)
SETTER(RmaAcquireLock, cb_lock)
SETTER(RmaReleaseLock, cb_release)
SETTER(ProgramBegin, cb_program_begin)
SETTER(ProgramEnd, cb_program_end)
SETTER(ThreadAcquireLock, cb_thread_lock)
SETTER(ThreadReleaseLock, cb_thread_lock)
SETTER(ThreadFork, cb_thread_fork)
OTF2_ErrorCode OTF2_Reader_RegisterEvtCallbacks(OTF2_Reader *, OTF2_EvtReader *, const OTF2_EvtReaderCallbacks *,
                                                void *);
OTF2_ErrorCode OTF2_Reader_ReadAllLocalEvents(OTF2_Reader *, OTF2_EvtReader *, uint64_t *);

/* One event, laid out as scalgraph.model.trace.EVENT_DTYPE (packed, 49 bytes), so the records are
 * the trace's event array itself.  Region references are mapped to region indices here; peers and
 * communicators stay OTF2's (comm ranks, communicator or window references) for the Python side. */
struct __attribute__((packed)) sg_otf2_record {
    double time;
    uint8_t kind;
    int32_t region, peer, tag, comm;
    int64_t bytes, bytes_recv, request;
};

/* Kinds: scalgraph.model.trace's EVENT_KINDS, and these, which the Python side resolves. */
enum { ENTER = 0, EXIT = 1, SEND = 2, RECV = 3, ISEND = 4, ISEND_COMPLETE = 5, IRECV_REQUEST = 6, IRECV = 7,
       COLL_BEGIN = 8, COLL_END = 9, RMA_PUT = 10, RMA_GET = 11, RMA_ACC = 12, RMA_SYNC = 13,
       REQUEST_CANCELLED = 14, REQUEST_LOCK = 100, ACQUIRE_LOCK = 101, PROGRAM_BEGIN = 102, PROGRAM_END = 103,
       THREAD_ACQUIRE_LOCK = 104, THREAD_RELEASE_LOCK = 105, THREAD_FORK = 106 };

struct sg_otf2_sink {
    struct sg_otf2_record *rec;
    uint64_t n, cap;               /* events beyond cap are counted, not stored */
    int64_t zero;                  /* ticks of time 0 */
    double resolution;             /* ticks per second */
    const int32_t *region_map;     /* region reference -> region index */
    uint32_t nregions;
};

static inline OTF2_CallbackCode put(void *ud, uint64_t t, int kind, uint32_t region, uint32_t peer, uint32_t tag,
                                    uint32_t comm, uint64_t bytes, uint64_t bytes_recv, uint64_t request) {
    struct sg_otf2_sink *s = ud;
    if (s->n < s->cap) {
        int32_t r = -1;
        if (kind <= EXIT)
            r = region < s->nregions ? s->region_map[region] : -1;
        /* the same arithmetic as numpy's (int64 ticks - zero) / resolution */
        s->rec[s->n] = (struct sg_otf2_record){.time = (double)((int64_t)t - s->zero) / s->resolution,
                                               .kind = (uint8_t)kind, .region = r, .peer = (int32_t)peer,
                                               .tag = (int32_t)tag, .comm = (int32_t)comm,
                                               .bytes = (int64_t)bytes, .bytes_recv = (int64_t)bytes_recv,
                                               .request = (int64_t)request < 0 ? -1 : (int64_t)request};
    }
    s->n++;
    return 0;
}

#define NOREQ UINT64_MAX
#define NONE UINT32_MAX
static OTF2_CallbackCode on_enter(HEAD, uint32_t r) { return put(ud, t, ENTER, r, NONE, 0, NONE, 0, 0, NOREQ); }
static OTF2_CallbackCode on_leave(HEAD, uint32_t r) { return put(ud, t, EXIT, r, NONE, 0, NONE, 0, 0, NOREQ); }
static OTF2_CallbackCode on_send(HEAD, uint32_t p, uint32_t c, uint32_t tag, uint64_t n) {
    return put(ud, t, SEND, NONE, p, tag, c, n, 0, NOREQ);
}
static OTF2_CallbackCode on_recv(HEAD, uint32_t p, uint32_t c, uint32_t tag, uint64_t n) {
    return put(ud, t, RECV, NONE, p, tag, c, n, 0, NOREQ);
}
static OTF2_CallbackCode on_isend(HEAD, uint32_t p, uint32_t c, uint32_t tag, uint64_t n, uint64_t q) {
    return put(ud, t, ISEND, NONE, p, tag, c, n, 0, q);
}
static OTF2_CallbackCode on_irecv(HEAD, uint32_t p, uint32_t c, uint32_t tag, uint64_t n, uint64_t q) {
    return put(ud, t, IRECV, NONE, p, tag, c, n, 0, q);
}
static OTF2_CallbackCode on_isend_complete(HEAD, uint64_t q) {
    return put(ud, t, ISEND_COMPLETE, NONE, NONE, 0, NONE, 0, 0, q);
}
static OTF2_CallbackCode on_irecv_request(HEAD, uint64_t q) {
    return put(ud, t, IRECV_REQUEST, NONE, NONE, 0, NONE, 0, 0, q);
}
static OTF2_CallbackCode on_cancelled(HEAD, uint64_t q) {
    return put(ud, t, REQUEST_CANCELLED, NONE, NONE, 0, NONE, 0, 0, q);
}
static OTF2_CallbackCode on_coll_begin(HEAD) { return put(ud, t, COLL_BEGIN, NONE, NONE, 0, NONE, 0, 0, NOREQ); }
static OTF2_CallbackCode on_coll_end(HEAD, uint8_t op, uint32_t c, uint32_t root, uint64_t sent, uint64_t got) {
    (void)op;
    return put(ud, t, COLL_END, NONE, root, 0, c, sent, got, NOREQ);
}
static OTF2_CallbackCode on_put(HEAD, uint32_t w, uint32_t remote, uint64_t n, uint64_t mid) {
    return put(ud, t, RMA_PUT, NONE, remote, 0, w, n, 0, mid);
}
static OTF2_CallbackCode on_get(HEAD, uint32_t w, uint32_t remote, uint64_t n, uint64_t mid) {
    return put(ud, t, RMA_GET, NONE, remote, 0, w, n, 0, mid);
}
static OTF2_CallbackCode on_atomic(HEAD, uint32_t w, uint32_t remote, uint8_t type, uint64_t n, uint64_t m,
                                   uint64_t mid) {
    (void)type;
    return put(ud, t, RMA_ACC, NONE, remote, 0, w, n, m, mid);
}
static OTF2_CallbackCode on_sync(HEAD, uint32_t w, uint32_t remote, uint8_t type) {
    (void)type;
    return put(ud, t, RMA_SYNC, NONE, remote, 0, w, 0, 0, NOREQ);
}
/* OTF2 LockType: EXCLUSIVE 0, SHARED 1 -> the RMA_SYNC tag of MPI_Win_lock (1 exclusive, 2 shared) */
static OTF2_CallbackCode on_request_lock(HEAD, uint32_t w, uint32_t remote, uint64_t id, uint8_t type) {
    return put(ud, t, REQUEST_LOCK, NONE, remote, type == 1 ? 2 : 1, w, 0, 0, id);
}
static OTF2_CallbackCode on_acquire_lock(HEAD, uint32_t w, uint32_t remote, uint64_t id, uint8_t type) {
    return put(ud, t, ACQUIRE_LOCK, NONE, remote, type == 1 ? 2 : 1, w, 0, 0, id);
}
static OTF2_CallbackCode on_release_lock(HEAD, uint32_t w, uint32_t remote, uint64_t id) {
    (void)id;
    return put(ud, t, RMA_SYNC, NONE, remote, 0, w, 0, 0, NOREQ);
}
static OTF2_CallbackCode on_program_begin(HEAD, uint32_t name, uint32_t nargs, const uint32_t *args) {
    (void)name, (void)nargs, (void)args;
    return put(ud, t, PROGRAM_BEGIN, NONE, NONE, 0, NONE, 0, 0, NOREQ);
}
/* OpenMP locks (Score-P): the lock id as the request, the acquisition order as the tag */
static OTF2_CallbackCode on_thread_acquire_lock(HEAD, uint8_t model, uint32_t id, uint32_t order) {
    (void)model;
    return put(ud, t, THREAD_ACQUIRE_LOCK, NONE, NONE, order, NONE, 0, 0, id);
}
static OTF2_CallbackCode on_thread_release_lock(HEAD, uint8_t model, uint32_t id, uint32_t order) {
    (void)model;
    return put(ud, t, THREAD_RELEASE_LOCK, NONE, NONE, order, NONE, 0, 0, id);
}
static OTF2_CallbackCode on_thread_fork(HEAD, uint8_t model, uint32_t threads) {
    (void)model;
    return put(ud, t, THREAD_FORK, NONE, NONE, 0, NONE, threads, 0, NOREQ);
}
static OTF2_CallbackCode on_program_end(HEAD, int64_t status) {
    return put(ud, t, PROGRAM_END, NONE, NONE, 0, NONE, (uint64_t)status, 0, NOREQ);
}

/* Read every event of one location whose event reader the caller opened into rec[0..cap).  Returns
 * the number of events (more than cap: only cap were stored; the caller reads the location again
 * with more room), or -1 if libotf2 reported an error. */
int64_t sg_otf2_read_location(OTF2_Reader *reader, OTF2_EvtReader *evt, struct sg_otf2_record *rec, uint64_t cap,
                              int64_t zero, double resolution, const int32_t *region_map, uint32_t nregions) {
    static OTF2_EvtReaderCallbacks *cbs;
    if (cbs == NULL) {
        cbs = OTF2_EvtReaderCallbacks_New();
        if (cbs == NULL)
            return -1;
        OTF2_EvtReaderCallbacks_SetEnterCallback(cbs, on_enter);
        OTF2_EvtReaderCallbacks_SetLeaveCallback(cbs, on_leave);
        OTF2_EvtReaderCallbacks_SetMpiSendCallback(cbs, on_send);
        OTF2_EvtReaderCallbacks_SetMpiRecvCallback(cbs, on_recv);
        OTF2_EvtReaderCallbacks_SetMpiIsendCallback(cbs, on_isend);
        OTF2_EvtReaderCallbacks_SetMpiIrecvCallback(cbs, on_irecv);
        OTF2_EvtReaderCallbacks_SetMpiIsendCompleteCallback(cbs, on_isend_complete);
        OTF2_EvtReaderCallbacks_SetMpiIrecvRequestCallback(cbs, on_irecv_request);
        OTF2_EvtReaderCallbacks_SetMpiRequestCancelledCallback(cbs, on_cancelled);
        OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(cbs, on_coll_begin);
        OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(cbs, on_coll_end);
        OTF2_EvtReaderCallbacks_SetRmaPutCallback(cbs, on_put);
        OTF2_EvtReaderCallbacks_SetRmaGetCallback(cbs, on_get);
        OTF2_EvtReaderCallbacks_SetRmaAtomicCallback(cbs, on_atomic);
        OTF2_EvtReaderCallbacks_SetRmaSyncCallback(cbs, on_sync);
        OTF2_EvtReaderCallbacks_SetRmaRequestLockCallback(cbs, on_request_lock);
        OTF2_EvtReaderCallbacks_SetRmaAcquireLockCallback(cbs, on_acquire_lock);
        OTF2_EvtReaderCallbacks_SetRmaReleaseLockCallback(cbs, on_release_lock);
        OTF2_EvtReaderCallbacks_SetProgramBeginCallback(cbs, on_program_begin);
        OTF2_EvtReaderCallbacks_SetProgramEndCallback(cbs, on_program_end);
        OTF2_EvtReaderCallbacks_SetThreadAcquireLockCallback(cbs, on_thread_acquire_lock);
        OTF2_EvtReaderCallbacks_SetThreadReleaseLockCallback(cbs, on_thread_release_lock);
        OTF2_EvtReaderCallbacks_SetThreadForkCallback(cbs, on_thread_fork);
    }
    struct sg_otf2_sink sink = {rec, 0, cap, zero, resolution, region_map, nregions};
    uint64_t read = 0;
    if (OTF2_Reader_RegisterEvtCallbacks(reader, evt, cbs, &sink) != 0 ||
        OTF2_Reader_ReadAllLocalEvents(reader, evt, &read) != 0)
        return -1;
    return (int64_t)sink.n;
}
