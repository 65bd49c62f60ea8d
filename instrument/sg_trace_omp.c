/* Trace mode, OpenMP part: per-thread records of what the OMPT tool (sg_ompt.c) sees -- the parallel
 * region's fork and join (on the encountering thread), each thread's implicit task begin/end, barrier
 * (implicit and explicit) enter/exit, lock and critical-section acquire/acquired/release -- and the
 * SIGPROF samples of the threads the main trace does not follow (the workers).
 *
 * Each thread writes its own buffer (no lock while the program runs); a full buffer is appended to the
 * rank's file rank-<r>.sgomp under a mutex, so memory stays bounded (SG_TOMP_CAP records per thread)
 * whatever the run length.  The signal handler appends samples too, so an OMPT callback marks its
 * buffer busy while it appends: a sample that arrives then is dropped (counted), never a half record.
 * The file is written through a temporary name and renamed at MPI_Finalize, like the main trace:
 *   [struct sg_tomp_header] then chunks [struct sg_tomp_chunk][struct sg_tomp_record [n]] ...
 * scalgraph/io/trace_omp.py reads it; scalgraph/trace/openmp.py turns it into thread locations. */
#include "sg_trace.h"
#include "sg_ompt.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SG_TOMP_CAP = 1 << 13, SG_TOMP_SLACK = 64 };   /* records per thread buffer; room kept for samples */

struct sg_tomp_header { char magic[8]; uint32_t version, record_size; int32_t rank, nranks; };   /* 24 bytes */
struct sg_tomp_chunk { uint32_t thread, n; uint32_t dropped, traced; };   /* traced: the MPI trace's thread */
struct sg_tomp_record { uint64_t time_ns, arg; uint32_t vertex; uint16_t kind, reserved; };   /* 24 bytes */

struct tomp_buf {
    struct sg_tomp_record rec[SG_TOMP_CAP];
    volatile uint32_t n;
    volatile int busy;
    uint32_t thread, dropped;
    int traced;
};

static struct tomp_buf *bufs_[SG_MAX_THREADS];
static uint32_t nbufs_;
static SG_TLS struct tomp_buf *mine_;
static pthread_mutex_t file_lock_ = PTHREAD_MUTEX_INITIALIZER;
static int closed_, enabled_ = -1;
static struct sg_trace_file file_ = SG_TRACE_FILE_INIT;

int sg_trace_omp_enabled(void) {
    if (enabled_ < 0) {
        const char *on = getenv("SCALGRAPH_TRACE");
        enabled_ = on != NULL && strcmp(on, "1") == 0;
    }
    return enabled_;
}

static struct tomp_buf *my_buf(void) {
    if (mine_ != NULL || closed_)
        return mine_;
    uint32_t i = __atomic_fetch_add(&nbufs_, 1, __ATOMIC_RELAXED);
    if (i >= SG_MAX_THREADS)
        return NULL;                      /* more threads than the pool: not recorded */
    struct tomp_buf *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->thread = i;
    b->traced = sg_trace_traces(sg_thread_peek());
    __atomic_store_n(&bufs_[i], b, __ATOMIC_RELEASE);
    mine_ = b;
    return b;
}

/* append b's records to the file (opened at the first flush after MPI_Init; before it they wait) */
static void flush_buf(struct tomp_buf *b) {
    uint32_t n = b->n;
    if (n == 0 || !sg_run.initialized)
        return;
    pthread_mutex_lock(&file_lock_);
    if (file_.fd < 0 && !file_.failed && sg_trace_file_open(&file_, "sgomp") >= 0) {
        struct sg_tomp_header h = {.magic = "SGOMPTR", .version = 1, .record_size = sizeof(struct sg_tomp_record),
                                   .rank = sg_run.rank, .nranks = sg_run.nranks};
        sg_trace_file_write(&file_, &h, sizeof h);
    }
    if (file_.fd >= 0) {
        struct sg_tomp_chunk c = {.thread = b->thread, .n = n, .dropped = b->dropped, .traced = (uint32_t)b->traced};
        sg_trace_file_write(&file_, &c, sizeof c);
        sg_trace_file_write(&file_, b->rec, n * sizeof b->rec[0]);
    }
    pthread_mutex_unlock(&file_lock_);
    b->dropped = 0;
    b->n = 0;
}

void sg_trace_omp_event(int kind, uint64_t arg) {
    if (!sg_trace_omp_enabled() || closed_)
        return;
    struct tomp_buf *b = my_buf();
    if (b == NULL)
        return;
    b->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (b->n >= SG_TOMP_CAP - SG_TOMP_SLACK)
        flush_buf(b);
    if (b->n < SG_TOMP_CAP)
        b->rec[b->n] = (struct sg_tomp_record){sg_now_ns(), arg, sg_get_cur(), (uint16_t)kind, 0};
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (b->n < SG_TOMP_CAP)
        b->n = b->n + 1;
    else
        b->dropped++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    b->busy = 0;
}

/* from the SIGPROF handler of a thread the main trace does not follow: async-signal-safe */
void sg_trace_omp_sample(uint32_t vertex) {
    struct tomp_buf *b = mine_;
    if (b == NULL || closed_)
        return;
    uint32_t n = b->n;
    if (b->busy || n >= SG_TOMP_CAP) {
        b->dropped++;
        return;
    }
    b->rec[n] = (struct sg_tomp_record){sg_now_ns(), 0, vertex, SG_TOMP_SAMPLE, 0};
    b->n = n + 1;
}

/* MPI_Finalize: write what every thread holds (the workers idle in the runtime's pool by now) */
void sg_trace_omp_finalize(void) {
    if (enabled_ != 1 || closed_ || sg_run.pid != (int)getpid())
        return;
    closed_ = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint32_t nb = nbufs_ < SG_MAX_THREADS ? nbufs_ : SG_MAX_THREADS;
    for (uint32_t i = 0; i < nb; i++) {
        struct tomp_buf *b = __atomic_load_n(&bufs_[i], __ATOMIC_ACQUIRE);
        if (b != NULL)
            flush_buf(b);
    }
    if (file_.fd >= 0)
        sg_trace_file_commit(&file_, "OpenMP trace");
}

/* --- the OMPT callbacks only trace mode needs (registered by sg_ompt.c's initializer) ------------- */

enum { ompt_callback_mutex_released = 17, ompt_callback_mutex_acquire = 26, ompt_callback_mutex_acquired = 27 };
enum { ompt_mutex_lock = 1, ompt_mutex_test_lock = 2, ompt_mutex_nest_lock = 3, ompt_mutex_test_nest_lock = 4,
       ompt_mutex_critical = 5 };

static int traced_mutex(int kind) { return kind >= ompt_mutex_lock && kind <= ompt_mutex_critical; }

/* lock id and kind in one value: the converter names critical sections and API locks apart */
static uint64_t lock_arg(int kind, uint64_t wait_id) { return (wait_id & 0x00FFFFFFFFFFFFFFull) | ((uint64_t)kind << 56); }

static void on_mutex_acquire(int kind, unsigned int hint, unsigned int impl, uint64_t wait_id, const void *ra) {
    (void)hint; (void)impl; (void)ra;
    if (traced_mutex(kind))
        sg_trace_omp_event(SG_TOMP_LOCK_WAIT, lock_arg(kind, wait_id));
}

static void on_mutex_acquired(int kind, uint64_t wait_id, const void *ra) {
    (void)ra;
    if (traced_mutex(kind))
        sg_trace_omp_event(SG_TOMP_LOCK_ACQUIRED, lock_arg(kind, wait_id));
}

static void on_mutex_released(int kind, uint64_t wait_id, const void *ra) {
    (void)ra;
    if (traced_mutex(kind))
        sg_trace_omp_event(SG_TOMP_LOCK_RELEASED, lock_arg(kind, wait_id));
}

static void on_parallel_end(ompt_data_t *parallel_data, ompt_data_t *task_data, int flags, const void *ra) {
    (void)parallel_data; (void)task_data; (void)flags; (void)ra;
    sg_trace_omp_event(SG_TOMP_JOIN, 0);
}

void sg_trace_omp_register(int (*set_callback)(int, ompt_callback_t)) {
    if (!sg_trace_omp_enabled())
        return;   /* profile mode pays for none of these */
    set_callback(ompt_callback_parallel_end, (ompt_callback_t)on_parallel_end);
    set_callback(ompt_callback_mutex_acquire, (ompt_callback_t)on_mutex_acquire);
    set_callback(ompt_callback_mutex_acquired, (ompt_callback_t)on_mutex_acquired);
    set_callback(ompt_callback_mutex_released, (ompt_callback_t)on_mutex_released);
}
