/* Calling context: the probe ABI of docs/runtime-abi.md (sg_cur, sg_fn_enter/exit, the instance
 * stack) and the resolution of the current PSG vertex. */
#include "sg_internal.h"
#include "sg_trace.h"
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>

/* initial-exec: the probes in the executable store into it with one instruction */
__thread uint32_t sg_cur __attribute__((tls_model("initial-exec"))) = 0;

static SG_TLS struct sg_thread *self_;
static struct sg_thread pool_[SG_MAX_THREADS];
/* the last resort if even mmap fails: shared, so calls on it may be taken for nested ones */
static struct sg_thread untracked_ = {.inst = -1, .tracked = 0, .perf_fd = -1};

static const struct sg_psg_tables *tables_;

/* Slots go back to the pool when their thread ends (a pthread key destructor), so a program that
 * creates threads 4 at a time keeps getting tracked slots however many it creates.  Threads beyond
 * 64 alive at once get a private, untracked record (context not followed: their calls go to the
 * root vertex, but every call is counted, with its own re-entrancy flag). */
static pthread_key_t slot_key_;
static pthread_once_t slot_once_ = PTHREAD_ONCE_INIT;
static int slot_key_ok_;

static void thread_exit(void *arg);
static void slot_key_init(void) { slot_key_ok_ = pthread_key_create(&slot_key_, thread_exit) == 0; }

static void thread_exit(void *arg) {
    struct sg_thread *t = arg;
    /* destructors run in no set order: while the sampler's has not closed this thread's event yet,
     * come back in the next round (POSIX runs them again while a value is set) */
    if (__atomic_load_n(&t->perf_fd, __ATOMIC_ACQUIRE) >= 0 && t->exit_rounds++ < 2) {
        pthread_setspecific(slot_key_, t);
        return;
    }
    self_ = NULL;   /* a later destructor calling MPI gets a fresh record */
    if (t >= pool_ && t < pool_ + SG_MAX_THREADS)
        __atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
    else if (t != &untracked_)
        munmap(t, sizeof *t);
}

static void start_record(struct sg_thread *t, uint32_t seed) {
    t->inst = -1;
    t->depth = 0;
    t->in_mpi = 0;
    t->exit_rounds = 0;
    t->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32) ^ (uint64_t)sg_now_ns();
    t->perf_id = 0;
    __atomic_store_n(&t->perf_fd, -1, __ATOMIC_RELEASE);
    t->mpi_end_cpu = sg_thread_cpu_ns();   /* computation before the first MPI call counts from here */
    t->mpi_end_wall = sg_now_ns();
    t->sample_cpu = t->mpi_end_cpu;
}

struct sg_thread *sg_thread_peek(void) { return self_; }

struct sg_thread *sg_thread_self(void) {
    struct sg_thread *t = self_;
    if (__builtin_expect(t != NULL, 1))
        return t;
    pthread_once(&slot_once_, slot_key_init);
    for (uint32_t slot = 0; slot < SG_MAX_THREADS; slot++) {
        int free_ = 0;
        if (__atomic_load_n(&pool_[slot].busy, __ATOMIC_RELAXED) ||
            !__atomic_compare_exchange_n(&pool_[slot].busy, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        t = &pool_[slot];
        start_record(t, slot);
        __atomic_store_n(&t->tracked, 1, __ATOMIC_RELEASE);   /* sg_thread_slot() may hand it out now */
        self_ = t;
        if (slot_key_ok_)
            pthread_setspecific(slot_key_, t);
        sg_sampler_thread_start(t);
        return t;
    }
    void *m = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    t = m == MAP_FAILED ? &untracked_ : m;
    if (t != &untracked_) {
        start_record(t, SG_MAX_THREADS);
        t->tracked = 0;
        if (slot_key_ok_)
            pthread_setspecific(slot_key_, t);
    }
    self_ = t;
    return t;
}

struct sg_thread *sg_thread_slot(uint32_t i) {
    if (i >= SG_MAX_THREADS || !__atomic_load_n(&pool_[i].tracked, __ATOMIC_ACQUIRE))
        return NULL;
    return &pool_[i];
}

void sg_register_psg(const struct sg_psg_tables *t) {
    if (t == NULL)
        return;
    /* fill in the function ids the probes load (docs/runtime-abi.md) */
    if (t->fid_slots != NULL)
        for (uint32_t f = 0; f < t->nfunctions; f++)
            if (t->fid_slots[f] != NULL)
                *t->fid_slots[f] = f;
    sg_store_resize(t->nvertices ? t->nvertices : 1);
    __atomic_store_n(&tables_, t, __ATOMIC_RELEASE);
}

uint32_t sg_nvertices(void) {
    const struct sg_psg_tables *T = tables_;
    return (T && T->nvertices) ? T->nvertices : 1;
}

const char *sg_psg_hash(void) {
    const struct sg_psg_tables *T = tables_;
    return (T && T->psg_hash) ? T->psg_hash : "";
}

void sg_fn_enter(uint32_t fid) {
    struct sg_thread *t = sg_thread_self();
    if (!t->tracked)
        return;
    uint32_t d = t->depth++;
    uint32_t k = sg_cur;
    int32_t c = t->inst;
    if (d < SG_STACK_MAX) {
        t->stack[d].inst = c;
        t->stack[d].local = k;
    }
    int32_t next = -1;
    const struct sg_psg_tables *T = tables_;
    if (T != NULL && fid < T->nfunctions) {
        if (c >= 0) {
            int32_t cand = T->inst_callee[T->inst_base[c] + k];
            if (cand >= 0 && (uint32_t)cand < T->ninstances && T->inst_func[cand] == fid)
                next = cand;
        }
        if (next < 0)
            next = (int32_t)T->func_default_inst[fid];
    }
    /* order matters for the signal handler: (c, 0) and (next, 0) are both valid pairs */
    sg_cur = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->inst = next;
    if (sg_trace_on && next >= 0 && d < SG_STACK_MAX)   /* the instance's FUNCTION vertex */
        sg_trace_function(t, SG_TEV_ENTER, T->inst_vid[T->inst_base[next]]);
}

void sg_fn_exit(void) {
    struct sg_thread *t = sg_thread_self();
    if (!t->tracked || t->depth == 0)
        return;
    uint32_t d = --t->depth;
    if (d >= SG_STACK_MAX)
        return;   /* overflowed frame: nothing was pushed */
    const struct sg_psg_tables *T = tables_;
    if (sg_trace_on && t->inst >= 0 && T != NULL)
        sg_trace_function(t, SG_TEV_EXIT, T->inst_vid[T->inst_base[t->inst]]);
    sg_cur = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->inst = t->stack[d].inst;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    sg_cur = t->stack[d].local;
}

/* The vertex now running on thread t; the root (0) when the context is unknown. */
uint32_t sg_vertex_of(const struct sg_thread *t) {
    const struct sg_psg_tables *T = tables_;
    if (T == NULL || t == NULL || t->inst < 0 || (uint32_t)t->inst >= T->ninstances)
        return 0;
    uint32_t v = T->inst_vid[T->inst_base[t->inst] + sg_cur];
    return v < T->nvertices ? v : 0;
}

uint32_t sg_current_vertex(void) { return sg_vertex_of(sg_thread_peek()); }
void sg_set_cur(uint32_t local) { sg_cur = local; }
uint32_t sg_get_cur(void) { return sg_cur; }
