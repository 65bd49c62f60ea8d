/* Per-vertex accumulators, the communication-dependence table and the communicator table.
 * Fixed-size storage allocated once (at sg_register_psg); the hot paths only add. */
#include "sg_internal.h"
#include "sg_ompt.h"
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

enum { SG_DEP_SLOTS = 1 << 14, SG_MAX_COMMS = 1024, SG_MAX_MEMBERS = 1 << 18 };

struct sg_run sg_run = {.rank = 0, .nranks = 1, .hz = 0, .comm_sample = 1.0};

/* before the tables register (constructors) everything goes to the root vertex */
static uint64_t root_arrays_[SG_VERTEX_ARRAYS], root_counters_[SG_MAX_COUNTERS];
uint64_t *sg_samples = &root_arrays_[0], *sg_calls = &root_arrays_[1], *sg_time_ns = &root_arrays_[2],
         *sg_wait_ns = &root_arrays_[3], *sg_sample_ns = &root_arrays_[4], *sg_comp_wall_ns = &root_arrays_[5],
         *sg_comp_cpu_ns = &root_arrays_[6], *sg_mpi_cpu_ns = &root_arrays_[7], *sg_counter_vals = root_counters_;
static uint32_t store_nv_ = 1;
uint64_t sg_deps_dropped;

static void *zeroed(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void sg_store_resize(uint32_t nv) {
    if (nv <= store_nv_)
        return;
    size_t n = nv;
    uint64_t *block = zeroed(n * sizeof(uint64_t) * (SG_VERTEX_ARRAYS + SG_MAX_COUNTERS));
    if (block == NULL)
        return;   /* keep charging everything to the root */
    uint64_t **arrays[SG_VERTEX_ARRAYS] = {&sg_samples, &sg_calls, &sg_time_ns, &sg_wait_ns, &sg_sample_ns,
                                           &sg_comp_wall_ns, &sg_comp_cpu_ns, &sg_mpi_cpu_ns};
    for (int i = 0; i < SG_VERTEX_ARRAYS; i++)
        block[i * n] = (*arrays[i])[0];   /* keep what the root got so far */
    sg_counter_vals = block + SG_VERTEX_ARRAYS * n;
    for (int i = SG_VERTEX_ARRAYS - 1; i >= 1; i--)
        *arrays[i] = block + i * n;
    __atomic_store_n(&sg_samples, block, __ATOMIC_RELEASE);   /* last: the signal handler checks it */
    __atomic_store_n(&store_nv_, nv, __ATOMIC_RELEASE);
}

/* ---- timer calibration ---- */
struct sg_tsc sg_tsc;
static uint64_t cal_tsc_, cal_ns_;

static int kernel_clock_is_tsc(void) {
    char buf[32] = {0};
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
}

/* First call: remember a (TSC, CLOCK_MONOTONIC) pair.  A later call at least 5 ms on turns the TSC on,
 * with the rate measured in between.  SCALGRAPH_TIMER=clock keeps clock_gettime. */
void sg_timer_calibrate(void) {
#if defined(__x86_64__) || defined(__i386__)
    const char *env = getenv("SCALGRAPH_TIMER");
    if (sg_tsc.usable || (env && strcmp(env, "clock") == 0))
        return;
    uint64_t tsc = __rdtsc(), ns = sg_clock_ns();
    if (cal_ns_ == 0) {
        if (kernel_clock_is_tsc()) {
            cal_tsc_ = tsc;
            cal_ns_ = ns;
        }
        return;
    }
    if (ns - cal_ns_ < 5000000 || tsc <= cal_tsc_)
        return;
    sg_tsc.ns_per_tick = (double)(ns - cal_ns_) / (double)(tsc - cal_tsc_);
    sg_tsc.tsc0 = tsc;
    sg_tsc.ns0 = ns;
    __atomic_store_n(&sg_tsc.usable, 1, __ATOMIC_RELEASE);
#endif
}

void sg_core_init(int32_t rank, int32_t nranks) {
    sg_run.rank = rank;
    sg_run.nranks = nranks;
    sg_run.initialized = 1;
}

static inline uint32_t clamp_vertex(uint32_t v) { return v < __atomic_load_n(&store_nv_, __ATOMIC_ACQUIRE) ? v : 0; }

uint32_t sg_add_sample(uint32_t vertex, uint64_t cpu_ns) {
    vertex = clamp_vertex(vertex);   /* loads store_nv_ first: the arrays it covers are in place */
    __atomic_fetch_add(&sg_samples[vertex], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sg_sample_ns[vertex], cpu_ns, __ATOMIC_RELAXED);
    return vertex;
}

void sg_record_mpi(uint32_t vertex, uint64_t ns, int waiting) {
    vertex = clamp_vertex(vertex);
    __atomic_fetch_add(&sg_calls[vertex], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sg_time_ns[vertex], ns, __ATOMIC_RELAXED);
    if (waiting)
        __atomic_fetch_add(&sg_wait_ns[vertex], ns, __ATOMIC_RELAXED);
}

void sg_add_time(uint32_t vertex, uint64_t ns) {
    __atomic_fetch_add(&sg_time_ns[clamp_vertex(vertex)], ns, __ATOMIC_RELAXED);
}

void sg_record_comp(uint32_t vertex, uint64_t comp_wall_ns, uint64_t comp_cpu_ns, uint64_t mpi_cpu_ns) {
    vertex = clamp_vertex(vertex);
    __atomic_fetch_add(&sg_comp_wall_ns[vertex], comp_wall_ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sg_comp_cpu_ns[vertex], comp_cpu_ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sg_mpi_cpu_ns[vertex], mpi_cpu_ns, __ATOMIC_RELAXED);
}

uint64_t sg_cpu_read_min_ns = 50000;

/* The cheapest of a few thread CPU clock reads, times 100 (the cost differs a lot between machines:
 * 0.1 us on bare metal, 1-6 us in this project's loaded VM). */
void sg_cpu_clock_calibrate(void) {
    uint64_t best = ~0ull;
    for (int i = 0; i < 8; i++) {
        uint64_t t0 = sg_clock_ns();
        (void)sg_thread_cpu_ns();
        uint64_t d = sg_clock_ns() - t0;
        best = d < best ? d : best;
    }
    uint64_t min_ns = 100 * best;
    sg_cpu_read_min_ns = min_ns < 50000 ? 50000 : min_ns > 1000000 ? 1000000 : min_ns;
}

/* The next sample is charged the thread's CPU time since its previous sample, minus what this MPI
 * call used [cpu0, cpu1]: the MPI time is measured exactly, and in a call that polls in the kernel
 * (where task-clock overflows are skipped) it would otherwise land on the computation after it.
 * Samples inside MPI calls leave the base alone, so the computation's CPU time is one chain of
 * deltas with the calls cut out: the tail of a stretch before a call goes to the first sample after
 * it, which keeps the estimate unbiased for the phase that follows an MPI call (resetting the base
 * at the call would rob that phase of half a period per call).
 * Compare-and-swap: the sampling handler on this thread may move the base meanwhile. */
static void skip_in_sample_base(struct sg_thread *t, uint64_t cpu0, uint64_t cpu1) {
    uint64_t base = __atomic_load_n(&t->sample_cpu, __ATOMIC_RELAXED), want;
    do {
        uint64_t from = base > cpu0 ? base : cpu0;
        if (cpu1 <= from)
            return;
        want = base + (cpu1 - from);
    } while (!__atomic_compare_exchange_n(&t->sample_cpu, &base, want, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

uint64_t sg_mpi_enter(struct sg_thread *t, uint64_t *t0) {
    uint64_t now = sg_now_ns();
    if (!t->tracked || now - t->mpi_end_wall < sg_cpu_read_min_ns) {
        *t0 = now;
        return t->mpi_end_cpu + (now - t->mpi_end_wall);
    }
    uint64_t cpu = sg_thread_cpu_ns();
    *t0 = sg_now_ns();
    return cpu;
}

/* Charges the computation that ended at t0 (since the thread's previous call returned) and the CPU
 * time of this call to `vertex`. Clamped so that extrapolated CPU never runs ahead of the clock. */
void sg_mpi_leave(struct sg_thread *t, uint32_t vertex, uint64_t t0, uint64_t dt, uint64_t cpu0, int waiting) {
    sg_record_mpi(vertex, dt, waiting);
    if (!t->tracked)
        return;   /* the shared slot of threads beyond the pool: no per-thread clocks */
    if (t->omp.arrays != NULL)   /* an OpenMP thread: its own row too (sg_threads.c) */
        sg_threads_mpi(t, vertex, dt);
    uint64_t end = t0 + dt, cpu1 = cpu0 + dt;
    if (dt >= sg_cpu_read_min_ns) {
        cpu1 = sg_thread_cpu_ns();
        end = sg_now_ns();   /* the clock read is the shim's, not the next computation's */
    }
    if (cpu1 < cpu0)
        cpu1 = cpu0;
    uint64_t comp_wall = t0 > t->mpi_end_wall ? t0 - t->mpi_end_wall : 0;
    uint64_t comp_cpu = cpu0 > t->mpi_end_cpu ? cpu0 - t->mpi_end_cpu : 0;
    if (comp_cpu > comp_wall)
        comp_cpu = comp_wall;   /* an extrapolated point ran ahead: CPU time cannot exceed wall time */
    comp_cpu += sg_ompt_take_worker_cpu();   /* and the OpenMP workers' computation meanwhile (sg_ompt.c) */
    sg_record_comp(vertex, comp_wall, comp_cpu, cpu1 - cpu0);
    t->mpi_end_wall = end;
    t->mpi_end_cpu = cpu1;
    skip_in_sample_base(t, cpu0, cpu1);
}

/* ---- dependence table: open addressing, linear probing, one spin lock ---- */
struct dep_slot {
    uint32_t used;
    struct sg_dep_record rec;
};
static struct dep_slot deps_[SG_DEP_SLOTS];
static uint32_t ndeps_;
static uint16_t dep_order_[SG_DEP_SLOTS];   /* the used slots in insertion order: the file's writer visits
                                               these, not the whole (mostly untouched, ~900 KB) table */
static char dep_lock_;

static inline void lock(char *l) {
    while (__atomic_test_and_set(l, __ATOMIC_ACQUIRE))
        ;
}
static inline void unlock(char *l) { __atomic_clear(l, __ATOMIC_RELEASE); }

static inline uint32_t mix(uint32_t h, uint32_t x) { return (h ^ x) * 16777619u; }

void sg_record_dep(uint32_t vertex, int32_t kind, int32_t peer, int32_t tag, int32_t comm,
                   int64_t bytes, uint64_t wait_ns) {
    vertex = clamp_vertex(vertex);
    uint32_t h = 2166136261u;
    h = mix(h, vertex); h = mix(h, (uint32_t)kind); h = mix(h, (uint32_t)peer);
    h = mix(h, (uint32_t)tag); h = mix(h, (uint32_t)comm);
    lock(&dep_lock_);
    for (uint32_t i = 0; i < SG_DEP_SLOTS; i++) {
        struct dep_slot *s = &deps_[(h + i) & (SG_DEP_SLOTS - 1)];
        if (!s->used) {
            if (ndeps_ >= SG_DEP_SLOTS * 3 / 4)
                break;   /* keep probes short: a full table drops new tuples */
            s->used = 1;
            s->rec = (struct sg_dep_record){.rank = sg_run.rank, .vertex = (int32_t)vertex,
                                            .kind = kind, .peer = peer, .tag = tag, .comm = comm};
            dep_order_[ndeps_] = (uint16_t)(s - deps_);
            __atomic_store_n(&ndeps_, ndeps_ + 1, __ATOMIC_RELEASE);
        }
        struct sg_dep_record *r = &s->rec;
        if (r->vertex == (int32_t)vertex && r->kind == kind && r->peer == peer && r->tag == tag &&
            r->comm == comm) {
            r->count += 1;
            r->bytes += bytes;
            r->wait += 1e-9 * (double)wait_ns;
            unlock(&dep_lock_);
            return;
        }
    }
    sg_deps_dropped++;
    unlock(&dep_lock_);
}

uint32_t sg_dep_count(void) { return ndeps_; }

uint32_t sg_dep_snapshot(struct sg_dep_record *out, uint32_t max) {
    uint32_t n = __atomic_load_n(&ndeps_, __ATOMIC_ACQUIRE);
    if (n > max)
        n = max;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = deps_[dep_order_[i]].rec;
        out[i].rank = sg_run.rank;   /* rows recorded before MPI_Init knew the rank */
    }
    return n;
}

/* ---- communicators: id, size and world ranks of each one seen ---- */
static struct sg_comm_record comms_[SG_MAX_COMMS];
static int32_t members_[SG_MAX_MEMBERS];
static uint32_t ncomms_, nmembers_;
static char comm_lock_;

/* The id is a hash of the member list plus how many communicators with the same members this rank
 * registered before, so every member of a communicator computes the same id (communicators are
 * created collectively, in the same order on every member) and different groups get different ids.
 * MPI_COMM_WORLD is registered first and gets id 0. */
int32_t sg_comm_add(const int32_t *members, int32_t n) {
    if (n < 0)
        return -1;
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++)
        h = mix(h, (uint32_t)members[i]);
    lock(&comm_lock_);
    if (ncomms_ >= SG_MAX_COMMS || nmembers_ + (uint32_t)n > SG_MAX_MEMBERS) {
        unlock(&comm_lock_);
        return -1;
    }
    uint32_t seq = 0;   /* in memory, `reserved` keeps the member hash (written out as 0) */
    for (uint32_t c = 0; c < ncomms_; c++)
        if (comms_[c].reserved == h && comms_[c].size == n)
            seq++;
    int32_t idx = (int32_t)ncomms_;
    int32_t id = (int32_t)((h + seq * 0x9E3779B1u) & 0x7fffffffu);
    if (idx == 0)
        id = 0;
    else if (id == 0)
        id = 1;
    comms_[idx] = (struct sg_comm_record){.id = id, .size = n, .offset = nmembers_, .reserved = h};
    memcpy(&members_[nmembers_], members, (size_t)n * sizeof(int32_t));
    nmembers_ += (uint32_t)n;
    __atomic_store_n(&ncomms_, ncomms_ + 1, __ATOMIC_RELEASE);
    unlock(&comm_lock_);
    return idx;
}

int32_t sg_comm_id(int32_t idx) {
    return (idx >= 0 && (uint32_t)idx < ncomms_) ? comms_[idx].id : -1;
}

int32_t sg_comm_world_rank(int32_t idx, int32_t rank) {
    if (idx < 0 || (uint32_t)idx >= ncomms_ || rank < 0 || rank >= comms_[idx].size)
        return -1;
    return members_[comms_[idx].offset + (uint32_t)rank];
}

uint32_t sg_comm_count(void) { return ncomms_; }
const struct sg_comm_record *sg_comm_records(void) { return comms_; }
uint32_t sg_member_count(void) { return nmembers_; }
const int32_t *sg_members(void) { return members_; }
