/* Calling context: the probe ABI of docs/runtime-abi.md (sg_cur, sg_fn_enter/exit, the instance
 * stack) and the resolution of the current PSG vertex. */
#include "sg_internal.h"
#include "sg_trace.h"
#include <stddef.h>

/* initial-exec: the probes in the executable store into it with one instruction */
__thread uint32_t sg_cur __attribute__((tls_model("initial-exec"))) = 0;

static SG_TLS struct sg_thread *self_;
static struct sg_thread pool_[SG_MAX_THREADS];
static struct sg_thread untracked_ = {.inst = -1, .tracked = 0, .perf_fd = -1};
static uint32_t pool_used_;

static const struct sg_psg_tables *tables_;

struct sg_thread *sg_thread_peek(void) { return self_; }

struct sg_thread *sg_thread_self(void) {
    struct sg_thread *t = self_;
    if (__builtin_expect(t != NULL, 1))
        return t;
    uint32_t slot = __atomic_fetch_add(&pool_used_, 1, __ATOMIC_RELAXED);
    if (slot < SG_MAX_THREADS) {
        t = &pool_[slot];
        t->inst = -1;
        t->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)slot << 32) ^ (uint64_t)sg_now_ns();
        t->perf_fd = -1;
        t->mpi_end_cpu = sg_thread_cpu_ns();   /* computation before the first MPI call counts from here */
        t->mpi_end_wall = sg_now_ns();
        t->sample_cpu = t->mpi_end_cpu;
        __atomic_store_n(&t->tracked, 1, __ATOMIC_RELEASE);   /* sg_thread_slot() may hand it out now */
        self_ = t;
        sg_sampler_thread_start(t);
        return t;
    }
    t = &untracked_;   /* shared by the threads beyond the pool: context is not tracked */
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
