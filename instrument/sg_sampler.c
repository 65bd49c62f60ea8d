/* SIGPROF sampler (setitimer ITIMER_PROF) and optional perf_event_open software/hardware counters.
 * The handler only reads the current vertex and adds to preallocated arrays (async-signal-safe). */
#include "sg_internal.h"
#include "sg_trace.h"
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

struct counter_kind {
    const char *name;
    uint32_t type;
    uint64_t config;
};

static const struct counter_kind known_counters_[] = {
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
};

static int counter_fd_[SG_MAX_COUNTERS];
static uint64_t counter_last_[SG_MAX_COUNTERS];
static char counter_names_[SG_MAX_COUNTERS][SG_NAME_LEN];
static uint32_t ncounters_;
static int running_;

double sg_env_number(const char *name, double fallback, double lo, double hi) {
    const char *text = getenv(name);
    if (text == NULL || *text == 0)
        return fallback;
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != 0 || !(v >= lo && v <= hi)) {
        fprintf(stderr, "scalgraph: %s='%s' is not a number from %g to %g; using %g\n", name, text, lo, hi,
                fallback);
        return fallback;
    }
    return v;
}

uint32_t sg_counter_count(void) { return ncounters_; }
const char *sg_counter_name(uint32_t i) { return counter_names_[i]; }

void sg_sample_now(void) {
    uint32_t nv = sg_nvertices();
    uint32_t v = sg_vertex_of(sg_thread_peek());
    uint64_t *samples = __atomic_load_n(&sg_samples, __ATOMIC_ACQUIRE);
    if (v >= nv || samples == NULL)
        v = 0;
    __atomic_fetch_add(&samples[v], 1, __ATOMIC_RELAXED);
    if (sg_trace_on)
        sg_trace_sample(sg_thread_peek(), v);
    for (uint32_t i = 0; i < ncounters_; i++) {
        uint64_t val;
        if (read(counter_fd_[i], &val, sizeof val) != (ssize_t)sizeof val)
            continue;
        uint64_t before = __atomic_exchange_n(&counter_last_[i], val, __ATOMIC_RELAXED);
        __atomic_fetch_add(&sg_counter_vals[(size_t)i * nv + v], val - before, __ATOMIC_RELAXED);
    }
}

static void on_sigprof(int sig, siginfo_t *info, void *uc) {
    (void)sig; (void)info; (void)uc;
    int saved = errno;
    sg_sample_now();
    errno = saved;
}

static int open_counter(const struct counter_kind *k) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = k->type;
    a.config = k->config;
    a.exclude_kernel = 1;   /* perf_event_paranoid 2 allows user-space counting only */
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* SCALGRAPH_COUNTERS=task-clock,page-faults: a counter that cannot be opened is left out (absent in
 * the profile, never recorded as zero) with one message. Counts belong to the thread that started
 * the sampler (the main thread). */
static void open_counters(void) {
    const char *spec = getenv("SCALGRAPH_COUNTERS");
    if (spec == NULL || *spec == 0)
        return;
    char buf[256];
    strncpy(buf, spec, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name != NULL;
         name = strtok_r(NULL, ",", &save)) {
        const struct counter_kind *k = NULL;
        for (size_t i = 0; i < sizeof known_counters_ / sizeof *known_counters_; i++)
            if (strcmp(known_counters_[i].name, name) == 0)
                k = &known_counters_[i];
        if (k == NULL) {
            fprintf(stderr, "scalgraph: unknown counter '%s' in SCALGRAPH_COUNTERS (known: task-clock, "
                            "page-faults, context-switches, cycles, instructions, ...); ignored\n", name);
            continue;
        }
        if (ncounters_ >= SG_MAX_COUNTERS) {
            fprintf(stderr, "scalgraph: at most %d counters; '%s' ignored\n", SG_MAX_COUNTERS, name);
            continue;
        }
        int fd = open_counter(k);
        if (fd < 0) {
            fprintf(stderr, "scalgraph: counter '%s' is not available here (%s); it is left out\n", name,
                    strerror(errno));
            continue;
        }
        counter_fd_[ncounters_] = fd;
        (void)!read(fd, &counter_last_[ncounters_], sizeof(uint64_t));
        strncpy(counter_names_[ncounters_], name, SG_NAME_LEN - 1);
        ncounters_++;
    }
}

static int program_owns_sigprof(void) {
    struct sigaction old;
    struct itimerval cur;
    if (sigaction(SIGPROF, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
        old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
        return 1;
    if (sigaction(SIGPROF, NULL, &old) == 0 && (old.sa_flags & SA_SIGINFO) &&
        old.sa_sigaction != on_sigprof)
        return 1;
    if (getitimer(ITIMER_PROF, &cur) == 0 && (cur.it_interval.tv_sec || cur.it_interval.tv_usec))
        return 1;
    return 0;
}

void sg_sampler_start(void) {
    double hz = sg_env_number("SCALGRAPH_HZ", 200.0, 0.0, 1e6);
    open_counters();
    if (!(hz > 0)) {
        sg_run.hz = 0;
        return;
    }
    if (hz > 1000)
        hz = 1000;   /* the kernel tick caps ITIMER_PROF near 250 Hz anyway */
    if (program_owns_sigprof()) {
        sg_run.sampling_off = 1;
        sg_run.hz = 0;
        fprintf(stderr, "scalgraph: the program already uses SIGPROF/ITIMER_PROF; sampling is off\n");
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0)
        return;
    long usec = (long)(1e6 / hz);
    struct itimerval it = {{usec / 1000000, usec % 1000000}, {usec / 1000000, usec % 1000000}};
    if (setitimer(ITIMER_PROF, &it, NULL) != 0)
        return;
    sg_run.hz = 1e6 / (double)usec;
    running_ = 1;
}

/* Called on every way out; also from the SIGTERM handler, so no stdio here. */
void sg_sampler_stop(void) {
    if (!running_)
        return;
    running_ = 0;
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) == 0 &&
        (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigprof)) {
        sg_run.sampling_off = 1;   /* the program took SIGPROF over: its timer is left alone */
        return;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
}
