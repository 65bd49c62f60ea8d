/* OpenMP threads as tracked threads: the shim registers as an OMPT tool (OpenMP 5.x tools interface,
 * implemented by LLVM's libomp; gcc's libgomp has none and simply never calls us).
 *
 *  - thread_begin: every OpenMP thread gets its pool slot at once, and with it its own task-clock
 *    sampling event (sg_sampler_thread_start), so worker threads are sampled like the master.
 *  - parallel_begin (on the encountering thread, inside __kmpc_fork_call): the calling context of the
 *    fork, i.e. the thread's PSG instance and sg_cur, which the probe set to the fork's CALL vertex
 *    (scalgraph/static/openmp.py makes the fork a call of the outlined region).
 *  - implicit_task begin on a worker: it takes that context over, so its sg_fn_enter of the outlined
 *    function resolves the same instance the master's does (the region under the right call path,
 *    not the outlined function's default instance); implicit_task end gives the worker its own back.
 *  - a worker's thread CPU in its implicit task, up to its arrival at the region's closing barrier
 *    (sync_region begin: the master cannot pass the barrier before that), is added to the
 *    computation the next MPI call of the process charges (sg_mpi_leave): a rank's computation
 *    between MPI calls is the CPU of all its threads, as its samples are.  (With several threads
 *    calling MPI, it goes to whichever calls first.)
 *
 *  - the profile's thread dimension (sg_threads.c): each OpenMP thread's role, its implicit tasks (idle
 *    time of workers between them) and its barrier waits (sync_region_wait), per vertex.
 *
 * SCALGRAPH_OMPT=0 declines the tool (libomp then runs without OMPT), and so does a set OMP_TOOL_LIBRARIES:
 * the user's own tool then gets the runtime, as it would without scalgraph (one tool per program). */
#include "sg_internal.h"
#include "sg_ompt.h"
#include "sg_trace.h"
#include <stdlib.h>
#include <string.h>

/* a context as one ompt_data_t value: bit 63 = set, bits 32..62 = instance + 1, bits 0..31 = sg_cur */
static uint64_t pack_context(int32_t inst, uint32_t cur) {
    return (1ull << 63) | ((uint64_t)(uint32_t)(inst + 1) << 32) | cur;
}

/* Switch thread t to a packed context; the order keeps (inst, sg_cur) a valid pair for the sampler's
 * signal handler at every step (as in sg_fn_exit). */
static void enter_context(struct sg_thread *t, uint64_t packed) {
    sg_set_cur(0);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->inst = (int32_t)((packed >> 32) & 0x7FFFFFFFu) - 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    sg_set_cur((uint32_t)packed);
}

static SG_TLS unsigned task_depth_;   /* implicit tasks of worker regions open on this thread */
static SG_TLS uint64_t task_cpu0_;      /* its thread CPU at the outermost one's begin; 0 once charged */
static uint64_t worker_cpu_ns_;         /* workers' CPU not yet charged to a computation segment */

uint64_t sg_ompt_take_worker_cpu(void) { return __atomic_exchange_n(&worker_cpu_ns_, 0, __ATOMIC_RELAXED); }

static void charge_worker_cpu(void) {
    if (task_cpu0_ == 0)
        return;
    uint64_t now = sg_thread_cpu_ns();
    if (now > task_cpu0_)
        __atomic_fetch_add(&worker_cpu_ns_, now - task_cpu0_, __ATOMIC_RELAXED);
    task_cpu0_ = 0;
}

static void on_thread_begin(int thread_type, ompt_data_t *thread_data) {
    thread_data->value = 0;
    struct sg_thread *t = sg_thread_self();   /* slot + sampling event for this thread */
    sg_threads_attach(t, thread_type == ompt_thread_initial  ? SG_ROLE_MASTER
                         : thread_type == ompt_thread_worker ? SG_ROLE_WORKER
                                                             : SG_ROLE_OTHER);
}

static void on_parallel_begin(ompt_data_t *encountering_task_data, const void *frame, ompt_data_t *parallel_data,
                              unsigned int requested, int flags, const void *codeptr_ra) {
    (void)encountering_task_data; (void)frame; (void)requested; (void)flags; (void)codeptr_ra;
    struct sg_thread *t = sg_thread_peek();
    parallel_data->value = (t != NULL && t->tracked && t->inst >= 0) ? pack_context(t->inst, sg_get_cur()) : 0;
    sg_trace_omp_event(SG_TOMP_FORK, requested);   /* trace mode only (sg_trace_omp.c) */
}

static void on_implicit_task(int endpoint, ompt_data_t *parallel_data, ompt_data_t *task_data,
                             unsigned int actual_parallelism, unsigned int index, int flags) {
    (void)actual_parallelism;
    if (flags & ompt_task_initial)
        return;
    sg_trace_omp_event(endpoint == ompt_scope_begin ? SG_TOMP_TASK_BEGIN : SG_TOMP_TASK_END, index);
    int outermost = index == 0 || task_depth_ == (endpoint == ompt_scope_begin ? 0u : 1u);
    if (index != 0 && endpoint == ompt_scope_begin && task_depth_++ == 0)
        task_cpu0_ = sg_thread_cpu_ns();
    else if (index != 0 && endpoint == ompt_scope_end && task_depth_ > 0 && --task_depth_ == 0)
        charge_worker_cpu();   /* if no closing barrier did */
    struct sg_thread *t = sg_thread_self();
    if (!t->tracked)
        return;
    if (outermost)
        sg_threads_task(t, endpoint == ompt_scope_begin, index);
    if (endpoint == ompt_scope_begin) {
        /* the master (index 0) is in the fork's context already */
        if (index == 0 || parallel_data == NULL || parallel_data->value == 0 || t->depth != 0) {
            task_data->value = 0;
            return;
        }
        task_data->value = pack_context(t->inst, sg_get_cur());
        enter_context(t, parallel_data->value);
    } else if (endpoint == ompt_scope_end && task_data != NULL && task_data->value != 0) {
        enter_context(t, task_data->value);
        task_data->value = 0;
    }
}

static void on_sync_region(int kind, int endpoint, ompt_data_t *parallel_data, ompt_data_t *task_data,
                           const void *codeptr_ra) {
    (void)parallel_data; (void)task_data; (void)codeptr_ra;
    if (kind == ompt_sync_region_barrier || kind == ompt_sync_region_barrier_implicit ||
        kind == ompt_sync_region_barrier_explicit || kind == ompt_sync_region_barrier_implicit_workshare ||
        kind == ompt_sync_region_barrier_implicit_parallel)
        sg_trace_omp_event(endpoint == ompt_scope_begin ? SG_TOMP_BARRIER_BEGIN : SG_TOMP_BARRIER_END, kind);
    if (endpoint == ompt_scope_begin && task_depth_ == 1 &&
        (kind == ompt_sync_region_barrier_implicit_parallel || kind == ompt_sync_region_barrier_implicit))
        charge_worker_cpu();
}

/* waiting at a barrier (the thread's profile keeps the time per vertex and its spinning apart) */
static void on_sync_region_wait(int kind, int endpoint, ompt_data_t *parallel_data, ompt_data_t *task_data,
                                const void *codeptr_ra) {
    (void)parallel_data; (void)task_data; (void)codeptr_ra;
    int barrier = (kind >= ompt_sync_region_barrier && kind <= ompt_sync_region_barrier_implementation) ||
                  kind == ompt_sync_region_barrier_implicit_workshare ||
                  kind == ompt_sync_region_barrier_implicit_parallel;
    struct sg_thread *t = sg_thread_peek();
    if (barrier && t != NULL)
        sg_threads_wait(t, endpoint == ompt_scope_begin, kind == ompt_sync_region_barrier_implicit_parallel);
}

static int ompt_initialize(ompt_function_lookup_t lookup, int initial_device_num, ompt_data_t *tool_data) {
    (void)initial_device_num; (void)tool_data;
    ompt_set_callback_t set_callback = (ompt_set_callback_t)lookup("ompt_set_callback");
    if (set_callback == NULL)
        return 0;   /* 0: the runtime drops the tool */
    set_callback(ompt_callback_thread_begin, (ompt_callback_t)on_thread_begin);
    set_callback(ompt_callback_parallel_begin, (ompt_callback_t)on_parallel_begin);
    set_callback(ompt_callback_implicit_task, (ompt_callback_t)on_implicit_task);
    set_callback(ompt_callback_sync_region, (ompt_callback_t)on_sync_region);
    sg_trace_omp_register(set_callback);   /* join and locks, in trace mode */
    set_callback(ompt_callback_sync_region_wait, (ompt_callback_t)on_sync_region_wait);
    sg_threads_attach(sg_thread_self(), SG_ROLE_MASTER);   /* the thread that starts the runtime */
    return 1;
}

static void ompt_finalize(ompt_data_t *tool_data) { (void)tool_data; }

/* Weak: a program (or another tool linked into it) that defines its own keeps it. */
__attribute__((weak, visibility("default")))
ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *runtime_version) {
    (void)omp_version; (void)runtime_version;
    static ompt_start_tool_result_t result = {ompt_initialize, ompt_finalize, {0}};
    const char *off = getenv("SCALGRAPH_OMPT");
    if (off != NULL && strcmp(off, "0") == 0)
        return NULL;
    /* the user named a tool of their own: yielding (NULL) lets the runtime load it, as it would without us */
    const char *theirs = getenv("OMP_TOOL_LIBRARIES");
    if (theirs != NULL && *theirs != 0)
        return NULL;
    return &result;
}
