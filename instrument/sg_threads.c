/* The profile's thread dimension (format 3): for each OpenMP thread the OMPT tool reports (sg_ompt.c),
 * per vertex its samples and their CPU, its MPI time and the time it waited at OpenMP barriers, and
 * per thread its role, team index and idle time.  Fixed-size arrays per thread, written sparsely (only
 * the vertices a thread touched), so the file grows with threads x vertices touched, never with
 * iterations.  A program without OpenMP (or libgomp, or SCALGRAPH_OMPT=0) attaches no thread and pays
 * one NULL test per sample and per MPI call.
 *
 * What is measured where:
 *  - samples/cpu_ns: the sampler's handler on the thread itself (sg_threads_sample); a sample taken while
 *    the thread waits at a barrier (a spinning wait) goes to its spin_ns instead, so the per-vertex CPU
 *    of a thread is its work (the rank's per-vertex arrays keep every sample, as before);
 *  - barrier_ns: wall time from sync_region_wait begin to end, at the vertex the thread was at when the
 *    wait began (the parallel-for's loop for its implicit barrier, the fork's call for the region's end);
 *    a worker's wait at the region's end counts until the master left that barrier;
 *  - idle_ns: a worker's wall time outside parallel regions, while the master runs serial code: from the
 *    master's leaving the join barrier to the worker's next region (libomp wakes it only then), and
 *    between its implicit tasks;
 *  - mpi_ns: wall time of the MPI calls the thread made, per vertex. */
#include "sg_internal.h"
#include <string.h>
#include <sys/mman.h>

enum { ARR_SAMPLES, ARR_CPU, ARR_MPI, ARR_BARRIER };

void sg_threads_attach(struct sg_thread *t, int32_t role) {
    struct sg_omp_thread *o = &t->omp;
    if (!t->tracked)
        return;
    if (o->role == 0 || role == SG_ROLE_MASTER)
        o->role = role;
    if (o->arrays != NULL)
        return;   /* a reused slot keeps its arrays (the slot is the thread's identity in the file) */
    uint32_t nv = sg_nvertices();
    void *m = mmap(NULL, (size_t)nv * 8 * SG_THREAD_ARRAYS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED)
        return;
    o->nv = nv;
    if (o->idle_t0 == 0 && role == SG_ROLE_WORKER)
        o->idle_t0 = sg_now_ns();
    __atomic_store_n(&o->arrays, (uint64_t *)m, __ATOMIC_RELEASE);   /* last: the signal handler checks it */
}

static inline uint64_t *cell(struct sg_omp_thread *o, int array, uint32_t v) {
    return &o->arrays[(size_t)array * o->nv + v];
}

/* in the sampler's signal handler, on t's own thread */
void sg_threads_sample(struct sg_thread *t, uint32_t v, uint64_t cpu_ns) {
    struct sg_omp_thread *o = &t->omp;
    if (__atomic_load_n(&o->arrays, __ATOMIC_ACQUIRE) == NULL || v >= o->nv)
        return;
    if (o->waiting) {
        __atomic_fetch_add(&o->spin_ns, cpu_ns, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(cell(o, ARR_SAMPLES, v), 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(cell(o, ARR_CPU, v), cpu_ns, __ATOMIC_RELAXED);
}

void sg_threads_mpi(struct sg_thread *t, uint32_t v, uint64_t ns) {
    struct sg_omp_thread *o = &t->omp;
    if (o->arrays != NULL && v < o->nv)
        __atomic_fetch_add(cell(o, ARR_MPI, v), ns, __ATOMIC_RELAXED);
}

/* the outermost implicit task of a parallel region begins or ends on t (index: its thread number) */
void sg_threads_task(struct sg_thread *t, int begin, uint32_t index) {
    struct sg_omp_thread *o = &t->omp;
    if (o->arrays == NULL)
        return;
    uint64_t now = sg_now_ns();
    if (begin) {
        o->team_index = (int32_t)index;
        o->tasks++;
        if (index == 0 && o->role != SG_ROLE_MASTER)
            o->role = SG_ROLE_MASTER;
        if (o->idle_t0 != 0 && now > o->idle_t0)
            o->idle_ns += now - o->idle_t0;
        o->idle_t0 = 0;
    } else if (index != 0) {
        o->idle_t0 = now;   /* a worker: idle until its next region */
    }
}

/* When the master last left a region's closing (join) barrier: every thread had arrived by then. */
static uint64_t join_release_ns_;

void sg_threads_wait(struct sg_thread *t, int begin, int join) {
    struct sg_omp_thread *o = &t->omp;
    if (o->arrays == NULL)
        return;
    if (begin) {
        o->wait_vertex = sg_vertex_of(t);
        o->wait_join = join;
        o->wait_t0 = sg_now_ns();
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        o->waiting = 1;
        return;
    }
    if (!o->waiting)
        return;
    o->waiting = 0;
    uint64_t now = sg_now_ns(), waited = now > o->wait_t0 ? now - o->wait_t0 : 0;
    if (join && o->team_index == 0) {
        __atomic_store_n(&join_release_ns_, now, __ATOMIC_RELEASE);
    } else if (join) {
        /* libomp reports the end of a worker's join-barrier wait only when the next region wakes it:
         * the part after the master left the barrier is idle time (the master ran serial code) */
        uint64_t release = __atomic_load_n(&join_release_ns_, __ATOMIC_ACQUIRE);
        if (release > o->wait_t0 && release < now) {
            o->idle_ns += now - release;
            waited = release - o->wait_t0;
        }
    }
    if (o->wait_vertex < o->nv)
        __atomic_fetch_add(cell(o, ARR_BARRIER, o->wait_vertex), waited, __ATOMIC_RELAXED);
}

/* ---- the file section (called by sg_writer.c; no stdio, no malloc: may run in the SIGTERM handler) ---- */

static int row_used(struct sg_omp_thread *o, uint32_t v) {
    for (int a = 0; a < SG_THREAD_ARRAYS; a++)
        if (*cell(o, a, v) != 0)
            return 1;
    return 0;
}

void sg_threads_count(uint32_t *nthreads, uint32_t *nrows) {
    *nthreads = *nrows = 0;
    for (uint32_t i = 0; i < SG_MAX_THREADS; i++) {
        struct sg_thread *t = sg_thread_slot(i);
        if (t == NULL || __atomic_load_n(&t->omp.arrays, __ATOMIC_ACQUIRE) == NULL)
            continue;
        (*nthreads)++;
        for (uint32_t v = 0; v < t->omp.nv; v++)
            *nrows += (uint32_t)row_used(&t->omp, v);
    }
}

uint64_t sg_threads_section_size(uint32_t nthreads, uint32_t nrows) {
    return sizeof(struct sg_thread_section) + (uint64_t)nthreads * sizeof(struct sg_thread_info) +
           (uint64_t)nrows * sizeof(struct sg_thread_row);
}

/* Threads still running may add to their arrays meanwhile: the rows are counted first (for the header's
 * file size) and exactly that many are written (a row that became non-zero after the count is left out, one that was counted is
 * written whatever it holds now). */
void sg_threads_write(void (*put)(const void *data, size_t len), uint32_t nthreads, uint32_t nrows) {
    struct sg_thread_section sec;
    memset(&sec, 0, sizeof sec);
    memcpy(sec.magic, "SGTHRD\0\0", 8);
    sec.nthreads = nthreads;
    sec.nrows = nrows;
    put(&sec, sizeof sec);
    uint64_t now = sg_now_ns();
    uint32_t written = 0, index = 0;
    for (uint32_t i = 0; i < SG_MAX_THREADS && index < sec.nthreads; i++) {
        struct sg_thread *t = sg_thread_slot(i);
        if (t == NULL || __atomic_load_n(&t->omp.arrays, __ATOMIC_ACQUIRE) == NULL)
            continue;
        struct sg_omp_thread *o = &t->omp;
        uint64_t idle_t0 = o->idle_t0, idle = o->idle_ns + (idle_t0 != 0 && now > idle_t0 ? now - idle_t0 : 0);
        /* a worker still in the join wait of the last region (libomp ends it only at the next fork): idle
         * since the master left that barrier */
        uint64_t release = __atomic_load_n(&join_release_ns_, __ATOMIC_ACQUIRE);
        if (o->waiting && o->wait_join && o->team_index != 0 && release > o->wait_t0 && now > release)
            idle += now - release;
        struct sg_thread_info info = {.slot = (int32_t)i, .role = (uint32_t)o->role, .team_index = o->team_index,
                                      .tasks = o->tasks, .spin_ns = o->spin_ns, .idle_ns = idle};
        put(&info, sizeof info);
        index++;
    }
    struct sg_thread_info none;   /* a thread counted but not met again (its slot was given back) */
    memset(&none, 0, sizeof none);
    for (; index < sec.nthreads; index++)
        put(&none, sizeof none);
    index = 0;
    for (uint32_t i = 0; i < SG_MAX_THREADS && index < sec.nthreads; i++) {
        struct sg_thread *t = sg_thread_slot(i);
        if (t == NULL || __atomic_load_n(&t->omp.arrays, __ATOMIC_ACQUIRE) == NULL)
            continue;
        struct sg_omp_thread *o = &t->omp;
        for (uint32_t v = 0; v < o->nv && written < sec.nrows; v++) {
            if (!row_used(o, v))
                continue;
            struct sg_thread_row row = {.thread = index, .vertex = v, .samples = *cell(o, ARR_SAMPLES, v),
                                        .cpu_ns = *cell(o, ARR_CPU, v), .mpi_ns = *cell(o, ARR_MPI, v),
                                        .barrier_ns = *cell(o, ARR_BARRIER, v)};
            put(&row, sizeof row);
            written++;
        }
        index++;
    }
    struct sg_thread_row pad;   /* rows counted but not met again: zero records keep the size */
    memset(&pad, 0, sizeof pad);
    for (; written < sec.nrows; written++)
        put(&pad, sizeof pad);
}
