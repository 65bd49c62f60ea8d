/* Trace mode: events of the main thread are encoded into a preallocated buffer (no allocation while
 * the program runs) that is written to the rank's file as one block whenever it fills up; the file
 * layout and the event encoding (kind, field mask, delta time and field varints) are in sg_trace.h.
 * Only the thread that loaded the shim (the one calling MPI_Init in nearly every MPI program) is
 * traced, so the buffer needs no lock and the events of a rank are one ordered stream. */
#include "sg_trace.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BUFFER_EVENTS = 1 << 16, BUFFER_BYTES = 1 << 20, MAX_EVENT_BYTES = 8 * 10, MAX_NAMES = 512,
       MAX_FILTER = 1 << 16, POLL_SITES = 1024 };

int sg_trace_on;

static uint8_t kinds_[BUFFER_EVENTS], masks_[BUFFER_EVENTS];   /* the block being filled, in .bss */
static uint8_t bytes_[BUFFER_BYTES];
static uint32_t nbuf_, nbytes_;
static uint64_t t_prev_, block_t_prev_;   /* time of the last event; of the one before the block */
static uint64_t nevents_, dropped_;
static uint32_t flushes_, nblocks_;
static int closed_;
static struct sg_trace_file file_ = SG_TRACE_FILE_INIT;
static const struct sg_thread *traced_;
static char names_[MAX_NAMES][SG_TRACE_NAME_LEN];
static uint8_t is_poll_[MAX_NAMES];   /* MPI_Test*, MPI_Iprobe, MPI_Improbe */
static uint32_t nnames_;
static int64_t next_id_ = 1;
static uint64_t cur_enter_, cur_exit_;                /* times of the MPI call being recorded */
static uint32_t cur_vertex_;
static int32_t cur_region_ = -1;
static int poll_pending_;   /* the current call is a poll whose ENTER waits for its first event */
static struct sg_trace_poll polls_[POLL_SITES];   /* open addressing on (region, vertex); calls 0 = free */
static uint32_t npolls_;
static struct sg_trace_poll poll_overflow_ = {.region = -1, .vertex = 0xFFFFFFFFu};
enum { MAX_SAMPLES = 1 << 17 };   /* 11 minutes at 200 Hz; later samples are not kept */
static struct sg_trace_sample samples_[MAX_SAMPLES];
static volatile uint32_t nsamples_;
static uint32_t filter_[MAX_FILTER], nfilter_;          /* sorted vertex ids whose ENTER/EXIT are dropped */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* SCALGRAPH_TRACE_FILTER: one vertex id per line, '#' starts a comment.  `scalgraph run --trace`
 * turns the user's filter file (vertex names, function names, ids) into this form. */
static void read_filter(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "scalgraph: cannot read SCALGRAPH_TRACE_FILTER file %s; tracing without a filter\n", path);
        return;
    }
    char line[512];
    int lineno = 0, complained = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *p = line, *end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == 0 || *p == '\n' || *p == '\r')
            continue;
        unsigned long v = strtoul(p, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
            end++;
        if (end == p || *end != 0) {
            if (!complained++)
                fprintf(stderr, "scalgraph: %s:%d is not a vertex id; pass the filter through "
                                "`scalgraph run --trace --trace-filter FILE`, which resolves names\n", path, lineno);
            continue;
        }
        if (nfilter_ < MAX_FILTER)
            filter_[nfilter_++] = (uint32_t)v;
    }
    fclose(f);
    qsort(filter_, nfilter_, sizeof filter_[0], cmp_u32);
}

static int filtered(uint32_t v) {
    uint32_t lo = 0, hi = nfilter_;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (filter_[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nfilter_ && filter_[lo] == v;
}

/* Throttling, as TAU does it (TAU_THROTTLE): a function entered more than throttle_calls_ times for
 * less than throttle_ns_ each on average is not traced from then on; its time goes to its caller's
 * region, as with a filter.  A C++ code calls small functions tens of millions of times (Quicksilver:
 * 35 M calls per rank at p=2), which no trace needs and no disk holds; the MPI events, the samples
 * and every function above the threshold stay.  10000 calls (TAU: 100000): at 100000 Quicksilver's
 * traced run at p=8 still took twice its plain time (32 M events), at 10000 it ran as fast as
 * untraced (8 M events).  SCALGRAPH_TRACE_THROTTLE=CALLS,MICROSECONDS sets it; 0 records everything. */
enum { THROTTLE_SLOTS = 1 << 14, THROTTLE_DEPTH = 512 };
struct throttle { uint32_t vertex, off; uint64_t calls, ns; };
static struct throttle throttle_[THROTTLE_SLOTS];      /* open addressing on vertex + 1 (0 = free) */
static uint64_t throttle_calls_ = 10000, throttle_ns_ = 10000;
static uint32_t nthrottled_;
static uint64_t open_enter_[THROTTLE_DEPTH];
static struct throttle *open_slot_[THROTTLE_DEPTH];
static uint8_t open_written_[THROTTLE_DEPTH];
static uint32_t depth_;

static struct throttle *throttle_slot(uint32_t vertex) {
    uint32_t h = (vertex * 2654435761u) & (THROTTLE_SLOTS - 1);
    for (uint32_t i = 0; i < 64; i++, h = (h + 1) & (THROTTLE_SLOTS - 1)) {
        if (throttle_[h].vertex == vertex + 1)
            return &throttle_[h];
        if (throttle_[h].vertex == 0) {
            throttle_[h].vertex = vertex + 1;
            return &throttle_[h];
        }
    }
    return NULL;   /* table crowded: this vertex is never throttled */
}

static void read_throttle(const char *spec) {
    unsigned long long calls = 0;
    double us = 0.0;
    int n = sscanf(spec, "%llu,%lf", &calls, &us);
    if (n >= 1)
        throttle_calls_ = calls;
    if (n == 2 && us >= 0.0)
        throttle_ns_ = (uint64_t)(us * 1000.0);
}

#ifndef SG_NO_AUTOSTART
__attribute__((constructor)) static void sg_trace_start(void) {
    const char *on = getenv("SCALGRAPH_TRACE");
    if (on == NULL || strcmp(on, "1") != 0)
        return;
    traced_ = sg_thread_self();
    const char *filter = getenv("SCALGRAPH_TRACE_FILTER");
    if (filter && *filter)
        read_filter(filter);
    const char *throttle = getenv("SCALGRAPH_TRACE_THROTTLE");
    if (throttle && *throttle)
        read_throttle(throttle);
    sg_trace_on = 1;
}
#endif

int sg_trace_file_open(struct sg_trace_file *f, const char *ext) {
    snprintf(f->final_name, sizeof f->final_name, "%s/rank-%d.%s", sg_out_dir(), (int)sg_run.rank, ext);
    /* exclusive, unpredictable temporary name (a symlink planted there is never followed) */
    f->fd = sg_open_temp(f->final_name, f->tmp_name, sizeof f->tmp_name);
    if (f->fd < 0)
        f->failed = 1;
    return f->fd;
}

void sg_trace_file_write(struct sg_trace_file *f, const void *p, size_t n) {
    const char *c = p;
    while (n > 0 && !f->failed) {
        ssize_t w = write(f->fd, c, n);
        if (w <= 0) {
            f->failed = 1;
            break;
        }
        c += w;
        n -= (size_t)w;
    }
}

void sg_trace_file_commit(struct sg_trace_file *f, const char *what) {
    if (close(f->fd) != 0)
        f->failed = 1;
    f->fd = -1;
    if (f->failed || rename(f->tmp_name, f->final_name) != 0) {
        unlink(f->tmp_name);
        fprintf(stderr, "scalgraph: cannot write the %s %s; set SCALGRAPH_OUT to a writable directory\n", what,
                f->final_name);
    }
}

static void write_all(const void *p, size_t n) { sg_trace_file_write(&file_, p, n); }

static void open_file(void) {
    if (sg_trace_file_open(&file_, "sgt") < 0) {
        fprintf(stderr, "scalgraph: cannot write the trace %s; set SCALGRAPH_OUT to a writable directory\n",
                file_.tmp_name);
        return;
    }
    struct sg_trace_file_header h = {.magic = "SGRAWTR", .version = SG_TRACE_VERSION,
                                     .event_size = 0, .rank = sg_run.rank,
                                     .nranks = sg_run.nranks, .header_size = sizeof h};
    write_all(&h, sizeof h);
}

/* before MPI_Init the rank is unknown, so the file is opened at the first flush after it */
static void flush(void) {
    if (nbuf_ == 0)
        return;
    if (file_.fd < 0 && !file_.failed && sg_run.initialized)
        open_file();
    if (file_.fd >= 0 && !file_.failed) {
        struct sg_trace_block_header h = {.nevents = nbuf_, .nbytes = nbytes_, .t_prev = block_t_prev_};
        write_all(&h, sizeof h);
        write_all(kinds_, nbuf_);
        write_all(masks_, nbuf_);
        write_all(bytes_, nbytes_);
        nblocks_++;
    } else {
        dropped_ += nbuf_;
    }
    nbuf_ = nbytes_ = 0;
    block_t_prev_ = t_prev_;
}

static inline uint8_t *varint(uint8_t *p, uint64_t v) {
    while (v >= 128) {
        *p++ = (uint8_t)(v | 128);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* One event: fields equal to their default (sg_trace.h) are left out; `vertex` only on ENTER/EXIT. */
static inline void put(int kind, uint64_t time, int32_t region, uint32_t vertex, int32_t peer, int32_t tag,
                       int32_t comm, int64_t bytes, int64_t aux) {
    if (closed_)
        return;
    if (__builtin_expect(nbuf_ == BUFFER_EVENTS || nbytes_ > BUFFER_BYTES - MAX_EVENT_BYTES, 0)) {
        flushes_++;
        flush();
    }
    nevents_++;
    uint8_t *p = varint(bytes_ + nbytes_, zigzag((int64_t)(time - t_prev_)));
    t_prev_ = time;
    unsigned mask = 0;
    if (region != -1)
        mask |= SG_TF_REGION, p = varint(p, zigzag(region));
    if (vertex != 0 && (kind == SG_TEV_ENTER || kind == SG_TEV_EXIT))
        mask |= SG_TF_VERTEX, p = varint(p, vertex);
    if (peer != -1)
        mask |= SG_TF_PEER, p = varint(p, zigzag(peer));
    if (tag != 0)
        mask |= SG_TF_TAG, p = varint(p, zigzag(tag));
    if (comm != -1)
        mask |= SG_TF_COMM, p = varint(p, zigzag(comm));
    if (bytes != 0)
        mask |= SG_TF_BYTES, p = varint(p, zigzag(bytes));
    if (aux != -1)
        mask |= SG_TF_AUX, p = varint(p, zigzag(aux));
    nbytes_ = (uint32_t)(p - bytes_);
    kinds_[nbuf_] = (uint8_t)kind;
    masks_[nbuf_++] = (uint8_t)mask;
}

static int32_t region_index(const char *name) {
    for (uint32_t i = 0; i < nnames_; i++)
        if (strncmp(names_[i], name, SG_TRACE_NAME_LEN - 1) == 0)
            return (int32_t)i;
    if (nnames_ == MAX_NAMES)
        return -1;
    strncpy(names_[nnames_], name, SG_TRACE_NAME_LEN - 1);
    is_poll_[nnames_] = strncmp(name, "MPI_Test", 8) == 0 || strcmp(name, "MPI_Iprobe") == 0 ||
                        strcmp(name, "MPI_Improbe") == 0;
    return (int32_t)nnames_++;
}

void sg_trace_mpi_enter(struct sg_thread *t, int32_t *rid, const char *name, uint32_t vertex, uint64_t t_enter,
                        uint64_t t_exit) {
    if (t != traced_)
        return;
    if (*rid < 0)
        *rid = region_index(name);
    cur_enter_ = t_enter;
    cur_exit_ = t_exit;
    cur_vertex_ = vertex;
    cur_region_ = *rid;
    /* a poll's ENTER is written with its first event (or sg_trace_poll_hit); without one it is counted */
    poll_pending_ = *rid >= 0 && is_poll_[*rid];
    if (!poll_pending_)
        put(SG_TEV_ENTER, t_enter, *rid, vertex, -1, 0, -1, 0, -1);
}

static inline void poll_enter(void) {
    if (poll_pending_) {
        poll_pending_ = 0;
        put(SG_TEV_ENTER, cur_enter_, cur_region_, cur_vertex_, -1, 0, -1, 0, -1);
    }
}

void sg_trace_poll_hit(struct sg_thread *t) {
    if (t == traced_)
        poll_enter();
}

static void count_poll(void) {
    uint64_t ns = cur_exit_ - cur_enter_;
    uint32_t h = (cur_vertex_ * 2654435761u ^ (uint32_t)cur_region_ * 40503u) & (POLL_SITES - 1);
    for (uint32_t i = 0; i < POLL_SITES; i++, h = (h + 1) & (POLL_SITES - 1)) {
        struct sg_trace_poll *s = &polls_[h];
        if (s->calls == 0) {              /* a free slot: this site is new */
            if (npolls_ == POLL_SITES / 2)
                break;                    /* table half full: keep probing short */
            *s = (struct sg_trace_poll){.region = cur_region_, .vertex = cur_vertex_};
            npolls_++;
        }
        if (s->region == cur_region_ && s->vertex == cur_vertex_) {
            s->calls++;
            s->ns += ns;
            return;
        }
    }
    poll_overflow_.calls++;               /* sites beyond the table are summed in one entry */
    poll_overflow_.ns += ns;
}

void sg_trace_mpi_exit(struct sg_thread *t) {
    if (t != traced_)
        return;
    if (poll_pending_) {      /* a poll that completed nothing: not an event */
        poll_pending_ = 0;
        if (!closed_)
            count_poll();
        return;
    }
    put(SG_TEV_EXIT, cur_exit_, cur_region_, cur_vertex_, -1, 0, -1, 0, -1);
}

void sg_trace_event(struct sg_thread *t, int kind, int32_t peer, int32_t tag, int32_t comm, int64_t bytes,
                    int64_t aux) {
    if (t != traced_)
        return;
    poll_enter();
    /* Scalasca's order: sends, posts and RMA at the call's start, receives and completions at its end */
    int at_start = kind == SG_TEV_SEND || kind == SG_TEV_ISEND || kind == SG_TEV_IRECV_REQUEST ||
                   kind == SG_TEV_COLL_BEGIN || (kind >= SG_TEV_RMA_PUT && kind <= SG_TEV_RMA_SYNC) ||
                   kind == SG_TEV_WINDOW_DEF;
    put(kind, at_start ? cur_enter_ : cur_exit_, -1, cur_vertex_, peer, tag, comm, bytes, aux);
}

int sg_trace_traces(const struct sg_thread *t) { return t == traced_ && !closed_; }

int64_t sg_trace_new_id(void) { return __atomic_fetch_add(&next_id_, 1, __ATOMIC_RELAXED); }

void sg_trace_sample(const struct sg_thread *t, uint32_t vertex) {
    uint32_t n = nsamples_;
    if (t != traced_) {
        sg_trace_omp_sample(vertex);   /* an OpenMP worker: into its own buffer */
        return;
    }
    if (closed_ || n >= MAX_SAMPLES || (nfilter_ && filtered(vertex)))
        return;
    samples_[n] = (struct sg_trace_sample){sg_now_ns(), vertex, 0};
    nsamples_ = n + 1;
}

void sg_trace_function(struct sg_thread *t, int kind, uint32_t vertex) {
    /* Not inside an MPI call: the library may call back into the program's functions (a user-defined
     * reduction, an error handler), and the call's own ENTER is written when it returns, with its start
     * time, so a callback's events would come first and the rank's times would run backwards (hypre). */
    if (t != traced_ || t->in_mpi || (nfilter_ && filtered(vertex)))
        return;
    uint64_t now = sg_now_ns();
    if (throttle_calls_ == 0) {
        put(kind, now, -1, vertex, -1, 0, -1, 0, -1);
        return;
    }
    if (kind == SG_TEV_ENTER) {
        uint32_t d = depth_++;
        if (d >= THROTTLE_DEPTH) {            /* too deep to follow: always recorded */
            put(kind, now, -1, vertex, -1, 0, -1, 0, -1);
            return;
        }
        struct throttle *slot = throttle_slot(vertex);
        open_enter_[d] = now;
        open_slot_[d] = slot;
        open_written_[d] = slot == NULL || !slot->off;
        if (open_written_[d])
            put(kind, now, -1, vertex, -1, 0, -1, 0, -1);
        return;
    }
    if (depth_ == 0) {                        /* an EXIT without its ENTER: keep it as it is */
        put(kind, now, -1, vertex, -1, 0, -1, 0, -1);
        return;
    }
    uint32_t d = --depth_;
    if (d >= THROTTLE_DEPTH) {
        put(kind, now, -1, vertex, -1, 0, -1, 0, -1);
        return;
    }
    struct throttle *slot = open_slot_[d];
    if (slot != NULL && !slot->off) {
        slot->calls++;
        slot->ns += now - open_enter_[d];
        if (slot->calls >= throttle_calls_ && slot->ns < slot->calls * throttle_ns_) {
            slot->off = 1;
            nthrottled_++;
        }
    }
    if (open_written_[d])
        put(kind, now, -1, vertex, -1, 0, -1, 0, -1);
}


static void close_file(void) {
    if (!sg_trace_on || closed_ || sg_run.pid != (int)getpid())
        return;
    flush();
    closed_ = 1;
    if (nthrottled_ > 0 && sg_run.rank == 0)
        fprintf(stderr, "scalgraph: trace: %u functions called over %llu times for under %.3g us each were traced "
                "only until then, as TAU throttles (SCALGRAPH_TRACE_THROTTLE=0 traces every call)\n", nthrottled_,
                (unsigned long long)throttle_calls_, (double)throttle_ns_ / 1000.0);
    if (file_.fd < 0)
        return;
    write_all(names_, sizeof names_[0] * nnames_);
    uint32_t ns = nsamples_;   /* the sampler was stopped before MPI_Finalize got here */
    uint64_t t = 0, sbytes = 0;
    uint32_t v = 0;
    for (uint32_t i = 0; i < ns; i++) {   /* delta varints, through the (written out) event buffer */
        uint8_t *p = varint(bytes_ + nbytes_, zigzag((int64_t)(samples_[i].time_ns - t)));
        p = varint(p, zigzag((int64_t)samples_[i].vertex - (int64_t)v));
        t = samples_[i].time_ns;
        v = samples_[i].vertex;
        nbytes_ = (uint32_t)(p - bytes_);
        if (nbytes_ > BUFFER_BYTES - MAX_EVENT_BYTES || i + 1 == ns) {
            write_all(bytes_, nbytes_);
            sbytes += nbytes_;
            nbytes_ = 0;
        }
    }
    uint32_t np = 0;
    for (uint32_t i = 0; i < POLL_SITES; i++)
        if (polls_[i].calls > 0) {
            write_all(&polls_[i], sizeof polls_[i]);
            np++;
        }
    if (poll_overflow_.calls > 0) {
        write_all(&poll_overflow_, sizeof poll_overflow_);
        np++;
    }
    struct sg_trace_file_trailer tr = {.nevents = nevents_ - dropped_, .nnames = nnames_, .flushes = flushes_,
                                       .dropped = (uint32_t)dropped_, .nsamples = ns, .nblocks = nblocks_,
                                       .npolls = np, .samples_bytes = (uint32_t)sbytes,
                                       .magic = {'S', 'G', 'R', 'A', 'W', 'E', 'N', 'D'}};
    write_all(&tr, sizeof tr);
    sg_trace_file_commit(&file_, "trace");
}

void sg_trace_finalize(struct sg_thread *t, uint32_t vertex, uint64_t t_enter) {
    static int32_t rid = -1;
    sg_trace_mpi_enter(t, &rid, "MPI_Finalize", vertex, t_enter, sg_now_ns());
    sg_trace_mpi_exit(t);
    close_file();
    sg_trace_omp_finalize();
}
