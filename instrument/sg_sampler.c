/* Samplers and optional perf_event_open counters.
 * Default sampler: one perf_event task-clock event per thread (an hrtimer on the thread's own CPU
 * time, so samples are spread evenly over the CPU time, whatever the kernel tick does); its overflow
 * sends a real-time signal to that thread (F_SETOWN_EX/F_SETSIG).  The event is armed for ARM_BATCH
 * overflows at a time (one REFRESH system call per batch, not per sample), and the shim's sigaction()
 * and signal() stop every event before the program installs its own handler for that signal, so the
 * program gets no stray signal that way (and at most ARM_BATCH per thread by any other way).
 * Fallback where perf events are not allowed (or SCALGRAPH_SAMPLER=itimer): setitimer(ITIMER_PROF),
 * which is tick-driven and biased, with its delivered rate measured and recorded.
 * Either way each sample is charged the CPU time since the previous one (thread CPU for task-clock,
 * process CPU for itimer), not 1/hz.  The handlers only read clocks and add to preallocated arrays. */
#define _GNU_SOURCE   /* F_SETSIG, F_SETOWN_EX, sched_getaffinity */
#include "sg_internal.h"
#include "sg_trace.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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

static volatile int running_, taken_;   /* taken_: the program installed its own handler for signo_ */
static int signo_, itimer_forced_, perf_errno_ = -1;
/* overflows per REFRESH: the re-arm system call costs ~6 us of a ~25 us sample on this project's VM;
 * it also bounds the stray signals of a program that takes the signal over behind our wrappers' back */
enum { ARM_BATCH = 16 };
static uint64_t period_ns_, nsamples_, proc_cpu_start_, proc_last_;
static pthread_key_t key_;
static int key_ok_;

static inline uint64_t process_cpu_ns(void) { return sg_cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

/* one sample on thread t (NULL: unknown thread, charged to the root), charged cpu_ns */
static void sample(struct sg_thread *t, uint64_t cpu_ns) {
    uint32_t v = sg_add_sample(sg_vertex_of(t), cpu_ns);
    __atomic_fetch_add(&nsamples_, 1, __ATOMIC_RELAXED);
    if (t != NULL && t->omp.arrays != NULL)   /* an OpenMP thread: its own row too (sg_threads.c) */
        sg_threads_sample(t, v, cpu_ns);
    if (sg_trace_on)
        sg_trace_sample(t, v);
    uint32_t nv = sg_nvertices();
    for (uint32_t i = 0; i < ncounters_; i++) {
        uint64_t val;
        if (read(counter_fd_[i], &val, sizeof val) != (ssize_t)sizeof val)
            continue;
        uint64_t before = __atomic_exchange_n(&counter_last_[i], val, __ATOMIC_RELAXED);
        __atomic_fetch_add(&sg_counter_vals[(size_t)i * nv + v], val - before, __ATOMIC_RELAXED);
    }
}

/* CPU time of thread t since its previous sample, less its MPI calls' (sg_mpi_leave moves the base) */
static uint64_t thread_cpu_since_sample(struct sg_thread *t) {
    uint64_t now = sg_thread_cpu_ns();
    uint64_t before = __atomic_exchange_n(&t->sample_cpu, now, __ATOMIC_RELAXED);
    return now > before ? now - before : 0;
}

void sg_sample_now(void) {
    struct sg_thread *t = sg_thread_peek();
    sample(t, (t != NULL && t->tracked) ? thread_cpu_since_sample(t) : 0);
}

void sg_sample_charge(uint64_t cpu_ns) { sample(sg_thread_peek(), cpu_ns); }

/* The task-clock event of this thread overflowed (si_code POLL_IN/POLL_HUP from the kernel, si_fd
 * its fd; anything else, e.g. a kill(2) of the same signal, is ignored).  POLL_HUP: the batch of
 * overflows it was armed for is used up (the kernel disabled it); REFRESH arms the next batch.
 * No other system call than the thread CPU clock's. */
static void on_task_clock(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    int saved = errno;
    struct sg_thread *t = sg_thread_peek();
    int fd = si->si_fd;
    if (si->si_code > 0 && t != NULL && fd >= 0 && fd == __atomic_load_n(&t->perf_fd, __ATOMIC_ACQUIRE) &&
        running_) {
        /* inside an MPI call: counted for the MPI vertex (timed exactly anyway) at the nominal period,
         * and the computation's chain of CPU deltas is left alone (see skip_in_sample_base) */
        sample(t, t->in_mpi ? period_ns_ : thread_cpu_since_sample(t));
        if (si->si_code == POLL_HUP && !taken_) {
            ioctl(fd, PERF_EVENT_IOC_REFRESH, ARM_BATCH);
            if (taken_)   /* signal_taken ran meanwhile on another thread and may have missed this one */
                ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        }
    }
    errno = saved;
}

static void on_sigprof(int sig, siginfo_t *info, void *uc) {
    (void)sig; (void)info; (void)uc;
    int saved = errno;
    if (running_) {
        uint64_t now = process_cpu_ns();
        uint64_t before = __atomic_exchange_n(&proc_last_, now, __ATOMIC_RELAXED);
        sample(sg_thread_peek(), now > before ? now - before : 0);
    }
    errno = saved;
}

/* ---- counters ---- */

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

/* ---- task-clock sampler ---- */

static int open_task_clock(void) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.disabled = 1;
    a.exclude_kernel = 1;   /* allowed at perf_event_paranoid 2; overflows only in user mode, so the signal
                               never interrupts a system call (the kernel part still counts, in the charge) */
    a.exclude_hv = 1;
    a.sample_period = period_ns_;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Route fd's overflows to this thread as signo_ and start it; 0 on success.  The signal settings
 * come before O_ASYNC: with O_ASYNC alone the kernel would send SIGIO (which terminates). */
static int arm_task_clock(struct sg_thread *t, int fd) {
    struct f_owner_ex owner = {F_OWNER_TID, (pid_t)syscall(SYS_gettid)};
    if (ioctl(fd, PERF_EVENT_IOC_ID, &t->perf_id) != 0 || fcntl(fd, F_SETSIG, signo_) != 0 ||
        fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETFL, O_ASYNC) != 0)
        return -1;
    t->sample_cpu = sg_thread_cpu_ns();
    __atomic_store_n(&t->perf_fd, fd, __ATOMIC_RELEASE);
    if (ioctl(fd, PERF_EVENT_IOC_REFRESH, ARM_BATCH) != 0) {
        __atomic_store_n(&t->perf_fd, -1, __ATOMIC_RELEASE);
        return -1;
    }
    if (key_ok_)
        pthread_setspecific(key_, t);   /* so that thread_gone closes it */
    return 0;
}

/* fd is still the event t opened (the program may have closed it and reused the number) */
static int still_ours(const struct sg_thread *t, int fd) {
    uint64_t id = 0;
    return fd >= 0 && ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 && id == t->perf_id;
}

/* pthread key destructor: the thread exits, its event goes with it */
static void thread_gone(void *arg) {
    struct sg_thread *t = arg;
    int fd = __atomic_exchange_n(&t->perf_fd, -1, __ATOMIC_ACQ_REL);
    if (!still_ours(t, fd))
        return;
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    close(fd);
}

/* A thread got its slot: it gets its own event (a few system calls, once per thread). */
void sg_sampler_thread_start(struct sg_thread *t) {
    if (!running_ || taken_ || sg_run.sampler != SG_SAMPLER_TASK_CLOCK ||
        (sg_run.pid && sg_run.pid != (int)getpid()))
        return;
    int fd = open_task_clock();
    if (fd >= 0 && arm_task_clock(t, fd) != 0)
        close(fd);
    else if (fd >= 0 && taken_)   /* the program took the signal while this one was being armed */
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
}

static int signal_is_free(int s, const sigset_t *blocked) {
    struct sigaction old;
    return sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL &&
           !sigismember(blocked, s);
}

/* A real-time signal nobody handles or blocks yet: from the middle of the range outwards, since
 * programs and libraries that use real-time signals take them from either end. */
static int choose_signal(void) {
    sigset_t blocked;
    pthread_sigmask(SIG_BLOCK, NULL, &blocked);
    int lo = SIGRTMIN + 2, hi = SIGRTMAX - 2, mid = (lo + hi) / 2;
    for (int i = 0; i <= 2 * (hi - lo); i++) {
        int s = mid + ((i & 1) ? (i + 1) / 2 : -(i / 2));
        if (s >= lo && s <= hi && signal_is_free(s, &blocked))
            return s;
    }
    return -1;
}

static int start_task_clock(double hz) {
    period_ns_ = (uint64_t)(1e9 / hz);
    struct sg_thread *self = sg_thread_self();   /* before running_: the slot must not open a second event */
    int fd = open_task_clock();
    if (fd < 0) {
        perf_errno_ = errno;
        return -1;
    }
    signo_ = choose_signal();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_task_clock;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (signo_ < 0 || !self->tracked || sigaction(signo_, &sa, NULL) != 0) {
        perf_errno_ = 0;
        close(fd);
        return -1;
    }
    key_ok_ = pthread_key_create(&key_, thread_gone) == 0;
    sg_run.sampler = SG_SAMPLER_TASK_CLOCK;
    sg_run.signo = signo_;
    running_ = 1;
    if (arm_task_clock(self, fd) != 0) {
        perf_errno_ = errno;
        running_ = 0;
        sg_run.sampler = SG_SAMPLER_OFF;
        sg_run.signo = 0;
        close(fd);
        signal(signo_, SIG_DFL);
        return -1;
    }
    return 0;
}

/* Every thread's event stops; the caller's own is closed, the others close at their thread's exit
 * (closing them here could race with their handlers).  No stdio: this also runs in the SIGTERM handler. */
static void stop_task_clock(void) {
    struct sg_thread *self = sg_thread_peek();
    for (uint32_t i = 0; i < SG_MAX_THREADS; i++) {
        struct sg_thread *t = sg_thread_slot(i);
        int fd = t != NULL ? __atomic_load_n(&t->perf_fd, __ATOMIC_ACQUIRE) : -1;
        if (!still_ours(t, fd))
            continue;
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        if (t == self && __atomic_exchange_n(&t->perf_fd, -1, __ATOMIC_ACQ_REL) == fd)
            close(fd);
    }
    struct sigaction cur;   /* our handler stays installed: a signal still pending finds it */
    if (taken_ || (sigaction(signo_, NULL, &cur) == 0 &&
                   (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_task_clock)))
        sg_run.sampling_off = 1;   /* the program took the signal over */
}

/* The program (or a library) is about to install its own disposition for the sampling signal: every
 * thread's event stops first, so none of its overflows reaches the program's handler.  Events stay
 * open (their threads close them); async-signal-safe, as sigaction() must be. */
static void signal_taken(int sig, const void *handler) {
    if (sig != signo_ || signo_ <= 0 || handler == (const void *)on_task_clock || !running_ ||
        sg_run.sampler != SG_SAMPLER_TASK_CLOCK || __atomic_exchange_n(&taken_, 1, __ATOMIC_ACQ_REL))
        return;
    for (uint32_t i = 0; i < SG_MAX_THREADS; i++) {
        struct sg_thread *t = sg_thread_slot(i);
        int fd = t != NULL ? __atomic_load_n(&t->perf_fd, __ATOMIC_ACQUIRE) : -1;
        if (still_ours(t, fd))
            ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    }
}

/* The program's sigaction() and signal() pass through here (libc's own __sigaction does the work;
 * calls that bypass these two, e.g. sigset() or a raw system call, are bounded by ARM_BATCH and
 * noticed at Finalize). */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);   /* glibc's */

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (act != NULL)
        signal_taken(sig, (act->sa_flags & SA_SIGINFO) ? (const void *)act->sa_sigaction
                                                       : (const void *)act->sa_handler);
    return __sigaction(sig, act, old);
}

extern __sighandler_t bsd_signal(int sig, __sighandler_t handler);   /* glibc's signal(), other name */

__sighandler_t signal(int sig, __sighandler_t handler) {
    signal_taken(sig, (const void *)handler);
    return bsd_signal(sig, handler);
}

/* ---- ITIMER_PROF fallback ---- */

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

static void start_itimer(double hz) {
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
    if (usec < 1)
        usec = 1;
    struct itimerval it = {{usec / 1000000, usec % 1000000}, {usec / 1000000, usec % 1000000}};
    sg_run.sampler = SG_SAMPLER_ITIMER;
    running_ = 1;
    if (setitimer(ITIMER_PROF, &it, NULL) != 0) {
        running_ = 0;
        sg_run.sampler = SG_SAMPLER_OFF;
    }
}

static void stop_itimer(void) {
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) == 0 &&
        (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigprof)) {
        sg_run.sampling_off = 1;   /* the program took SIGPROF over: its timer is left alone */
        return;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
}

/* SCALGRAPH_HZ (default 1000, at most 10000, 0 = off); SCALGRAPH_SAMPLER=itimer forces the fallback. */
void sg_sampler_start(void) {
    double hz = sg_env_number("SCALGRAPH_HZ", 1000.0, 0.0, 10000.0);
    open_counters();
    sg_run.sampler = SG_SAMPLER_OFF;
    sg_run.hz = 0;
    if (!(hz > 0))
        return;
    const char *want = getenv("SCALGRAPH_SAMPLER");
    if (want != NULL && *want != 0) {
        itimer_forced_ = strcmp(want, "itimer") == 0;
        if (!itimer_forced_ && strcmp(want, "task-clock") != 0)
            fprintf(stderr, "scalgraph: SCALGRAPH_SAMPLER='%s' is not task-clock or itimer; using task-clock\n",
                    want);
    }
    sg_run.hz = hz;
    proc_cpu_start_ = proc_last_ = process_cpu_ns();
    if (!itimer_forced_ && start_task_clock(hz) == 0)
        return;
    start_itimer(hz);
}

/* Called on every way out; also from the SIGTERM handler, so no stdio here.  A forked child leaves
 * the parent's events alone (it inherited their fds). */
void sg_sampler_stop(void) {
    if (!running_ || (sg_run.pid && sg_run.pid != (int)getpid()))
        return;
    running_ = 0;
    uint64_t cpu = process_cpu_ns() - proc_cpu_start_;
    sg_run.sampled_cpu = 1e-9 * (double)cpu;
    sg_run.hz_delivered = cpu > 0 ? (double)__atomic_load_n(&nsamples_, __ATOMIC_RELAXED) / sg_run.sampled_cpu : 0;
    if (sg_run.sampler == SG_SAMPLER_TASK_CLOCK)
        stop_task_clock();
    else
        stop_itimer();
}

/* One line for rank 0 at MPI_Init when perf events were refused and the biased fallback runs. */
void sg_sampler_report(int rank) {
    if (rank != 0 || sg_run.sampler != SG_SAMPLER_ITIMER || itimer_forced_)
        return;
    fprintf(stderr, "scalgraph: perf events are not available here (%s); sampling falls back to ITIMER_PROF, "
                    "which is tick-driven and biased (see perf_event_paranoid, seccomp)\n",
            perf_errno_ > 0 ? strerror(perf_errno_) : "no free real-time signal");
}

const char *sg_sampler_stop_note(void) {
    static char note[160];
    if (sg_run.sampler == SG_SAMPLER_TASK_CLOCK)
        snprintf(note, sizeof note, "the program installed its own handler for signal %d (SIGRTMIN+%d), "
                 "scalgraph's sampling signal", signo_, signo_ - SIGRTMIN);
    else
        snprintf(note, sizeof note, "the program installed its own SIGPROF handler");
    return note;
}

uint32_t sg_affinity_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    return (uint32_t)CPU_COUNT(&set);
}
