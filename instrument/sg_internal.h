/* State shared by the shim's C files (not part of the public API or the cffi cdef). */
#ifndef SG_INTERNAL_H
#define SG_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "scalgraph.h"

#define SG_HIDDEN __attribute__((visibility("hidden")))
#define SG_TLS __thread __attribute__((tls_model("initial-exec")))

enum { SG_STACK_MAX = 256, SG_MAX_THREADS = 64 };

/* What the profile keeps per OpenMP thread (pool slot), beside the per-rank arrays (sg_threads.c). */
struct sg_omp_thread {
    uint64_t *arrays;        /* [SG_THREAD_ARRAYS][nv]: samples, cpu_ns, mpi_ns, barrier_ns; NULL if none */
    uint32_t nv;
    int32_t role;            /* SG_ROLE_* */
    int32_t team_index;      /* its thread number in the last team it ran an implicit task of */
    volatile int waiting;    /* inside an OpenMP barrier wait (samples then go to spin_ns) */
    int wait_join;           /* that wait is at a region's closing (join) barrier */
    uint32_t wait_vertex;    /* where that wait began */
    uint64_t wait_t0, idle_t0;
    uint64_t idle_ns, spin_ns, tasks;
};

/* One per thread, from a preallocated pool (no malloc, no TLS beyond one pointer, so the core
 * library can also be dlopened by the tests). */
struct sg_thread {
    int32_t inst;            /* current PSG instance, -1 = unknown (before main, untracked thread) */
    uint32_t depth;          /* call depth, also counted beyond SG_STACK_MAX */
    volatile int in_mpi;     /* re-entrancy guard of the PMPI wrappers */
    int tracked;             /* 0 for threads that did not get a pool slot */
    int busy;                /* pool slot handed to a live thread (returned at its exit) */
    int exit_rounds;         /* destructor rounds waited for the sampler to close perf_fd */
    uint64_t rng;            /* xorshift state for SCALGRAPH_COMM_SAMPLE */
    int perf_fd;             /* this thread's task-clock sampling event, -1 if none */
    uint64_t perf_id;        /* its PERF_EVENT_IOC_ID: a program that closed the fd cannot make us touch another */
    uint64_t sample_cpu;     /* thread CPU ns at its previous sample (what the next one is charged from) */
    uint64_t mpi_end_wall;   /* sg_now_ns() when its previous MPI call returned (or the thread was first seen) */
    uint64_t mpi_end_cpu;    /* its thread CPU ns then */
    struct sg_omp_thread omp; /* its OpenMP profile (sg_threads.c), filled while the OMPT tool runs */
    struct { int32_t inst; uint32_t local; } stack[SG_STACK_MAX];
};

/* global state of the run (meta data written into the header) */
struct sg_run {
    int32_t rank, nranks;
    int initialized;         /* sg_core_init ran (MPI_Init seen or a test set it up) */
    int written;             /* the profile file has been written */
    int sampling_off;        /* the program owns the sampler's signal */
    uint32_t sampler;        /* SG_SAMPLER_* that is (or was) running */
    int signo;               /* the task-clock sampler's signal */
    uint32_t cores, ranks_on_host;
    double hz_delivered, sampled_cpu;
    int pid;                 /* process that owns the file (fork children do not write) */
    double hz, comm_sample;  /* hz: the rate asked for */
    double start_time, end_time;
    double clock_offset_init, clock_offset_final, clock_rtt_init, clock_rtt_final;
    char host[64];
    char mpi_library[256];
};

extern struct sg_run sg_run SG_HIDDEN;

struct sg_thread *sg_thread_self(void) SG_HIDDEN;       /* never NULL */
struct sg_thread *sg_thread_peek(void) SG_HIDDEN;       /* NULL if the thread has none yet */
struct sg_thread *sg_thread_slot(uint32_t i) SG_HIDDEN;  /* pool slot i if it was handed out, else NULL */
uint32_t sg_vertex_of(const struct sg_thread *t) SG_HIDDEN;
uint32_t sg_nvertices(void) SG_HIDDEN;
const char *sg_psg_hash(void) SG_HIDDEN;
void sg_store_resize(uint32_t nvertices) SG_HIDDEN;

/* accumulators (sg_store.c) */
extern uint64_t *sg_samples SG_HIDDEN, *sg_calls SG_HIDDEN, *sg_time_ns SG_HIDDEN, *sg_wait_ns SG_HIDDEN;
extern uint64_t *sg_counter_vals SG_HIDDEN;            /* [SG_MAX_COUNTERS][nvertices] */
extern uint64_t *sg_sample_ns SG_HIDDEN, *sg_comp_wall_ns SG_HIDDEN, *sg_comp_cpu_ns SG_HIDDEN,
    *sg_mpi_cpu_ns SG_HIDDEN;
extern uint64_t sg_deps_dropped SG_HIDDEN;
void sg_add_time(uint32_t vertex, uint64_t ns) SG_HIDDEN;   /* time without another call */
uint32_t sg_add_sample(uint32_t vertex, uint64_t cpu_ns) SG_HIDDEN;   /* returns the vertex charged */
uint32_t sg_dep_snapshot(struct sg_dep_record *out, uint32_t max) SG_HIDDEN;
uint32_t sg_dep_count(void) SG_HIDDEN;
uint32_t sg_comm_count(void) SG_HIDDEN;
const struct sg_comm_record *sg_comm_records(void) SG_HIDDEN;
uint32_t sg_member_count(void) SG_HIDDEN;
const int32_t *sg_members(void) SG_HIDDEN;

/* sampler and counters (sg_sampler.c) */
void sg_sampler_start(void) SG_HIDDEN;
void sg_sampler_stop(void) SG_HIDDEN;
void sg_sampler_thread_start(struct sg_thread *t) SG_HIDDEN;   /* a thread got its slot */
const char *sg_sampler_stop_note(void) SG_HIDDEN;   /* why samples stopped early */
void sg_sampler_report(int rank) SG_HIDDEN;          /* one line on rank 0 if perf events were refused */
uint32_t sg_affinity_cores(void) SG_HIDDEN;          /* CPUs this process may run on */
uint32_t sg_counter_count(void) SG_HIDDEN;
const char *sg_counter_name(uint32_t i) SG_HIDDEN;

/* OpenMP threads' own profile (sg_threads.c): per (vertex, thread) samples, CPU, MPI and barrier time */
void sg_threads_attach(struct sg_thread *t, int32_t role) SG_HIDDEN;   /* OMPT: t is an OpenMP thread */
void sg_threads_sample(struct sg_thread *t, uint32_t vertex, uint64_t cpu_ns) SG_HIDDEN;
void sg_threads_mpi(struct sg_thread *t, uint32_t vertex, uint64_t ns) SG_HIDDEN;
void sg_threads_task(struct sg_thread *t, int begin, uint32_t index) SG_HIDDEN;   /* outermost implicit task */
void sg_threads_wait(struct sg_thread *t, int begin, int join) SG_HIDDEN;   /* barrier wait (join: region's end) */
void sg_threads_count(uint32_t *nthreads, uint32_t *nrows) SG_HIDDEN;   /* what the file section will hold */
uint64_t sg_threads_section_size(uint32_t nthreads, uint32_t nrows) SG_HIDDEN;
void sg_threads_write(void (*put)(const void *data, size_t len), uint32_t nthreads, uint32_t nrows) SG_HIDDEN;

/* a number from the environment in [lo, hi]; anything else says so on stderr and gives `fallback` */
double sg_env_number(const char *name, double fallback, double lo, double hi) SG_HIDDEN;

/* exit paths (sg_writer.c) */
void sg_install_exit_handlers(void) SG_HIDDEN;
const char *sg_out_dir(void) SG_HIDDEN;
int sg_output_wanted(void) SG_HIDDEN;                                    /* SCALGRAPH_OUT or SCALGRAPH_PROFILE=1 */
int sg_open_temp(const char *final, char *tmp, size_t cap) SG_HIDDEN;  /* O_EXCL|O_NOFOLLOW, random name */

static inline uint64_t sg_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The timer of the wrappers: CLOCK_MONOTONIC nanoseconds, read through the TSC once it is calibrated
 * against CLOCK_MONOTONIC (sg_timer_calibrate, at MPI_Init) and the kernel itself uses the TSC as its
 * clock source (so it is invariant and synchronised).  On this project's VM clock_gettime costs
 * 90 ns and rdtsc 37 ns, and every MPI call reads the timer twice. */
struct sg_tsc {
    int usable;
    uint64_t tsc0, ns0;
    double ns_per_tick;
};
extern struct sg_tsc sg_tsc SG_HIDDEN;
void sg_timer_calibrate(void) SG_HIDDEN;

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t sg_now_ns(void) {
    if (__builtin_expect(sg_tsc.usable, 1)) {
        uint64_t t = __rdtsc();
        return t > sg_tsc.tsc0 ? sg_tsc.ns0 + (uint64_t)((double)(t - sg_tsc.tsc0) * sg_tsc.ns_per_tick)
                               : sg_tsc.ns0;
    }
    return sg_clock_ns();
}
#else
static inline uint64_t sg_now_ns(void) { return sg_clock_ns(); }
#endif

static inline uint64_t sg_cpu_clock_ns(clockid_t which) {
    struct timespec ts;
    if (clock_gettime(which, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
/* a system call (no vDSO for CPU clocks): about 0.8-1.3 us on this project's VM */
static inline uint64_t sg_thread_cpu_ns(void) { return sg_cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

/* ---- computation between MPI calls (sg_store.c) ----
 * A wrapper brackets its PMPI call with sg_mpi_enter/sg_mpi_leave.  The thread CPU clock is read only
 * around intervals of sg_cpu_read_min_ns or more (100 clock reads' worth, 50 us to 1 ms): a shorter
 * interval is taken as all CPU (a thread descheduled in it would have made it a time slice long), so
 * Iprobe/Test polling pays no system call and the reads cost at most about 2 % of what they measure. */
extern uint64_t sg_cpu_read_min_ns SG_HIDDEN;
void sg_cpu_clock_calibrate(void) SG_HIDDEN;
uint64_t sg_mpi_enter(struct sg_thread *t, uint64_t *t0) SG_HIDDEN;   /* thread CPU ns; *t0 = wall ns */
void sg_mpi_leave(struct sg_thread *t, uint32_t vertex, uint64_t t0, uint64_t dt, uint64_t cpu0, int waiting)
    SG_HIDDEN;

static inline double sg_wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
