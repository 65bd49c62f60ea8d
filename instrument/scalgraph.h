/* scalgraph runtime shim: the one header that defines the C API and the on-disk records.
 * It is also the cffi cdef for Python (so keep it free of preprocessor logic inside the
 * SG_CDEF_BEGIN/END region: plain typedefs, structs, enums and prototypes only).
 * The probe ABI is documented in docs/runtime-abi.md. */
#ifndef SCALGRAPH_H
#define SCALGRAPH_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* SG_CDEF_BEGIN */
struct sg_psg_tables {
    const char *psg_hash;
    uint32_t nvertices, nfunctions, ninstances;
    const uint32_t *inst_base;
    const uint32_t *inst_func;
    const uint32_t *inst_vid;
    const int32_t *inst_callee;
    const uint32_t *func_default_inst;
    uint32_t * const *fid_slots;
    const uint8_t *vertex_kind;
};
void sg_register_psg(const struct sg_psg_tables *t);
void sg_fn_enter(uint32_t fid);
void sg_fn_exit(void);

/* ---- On-disk profile: one file per rank, rank-<r>.sgp (little-endian, this exact layout) ----
 * [struct sg_file_header]
 * [uint64 samples  [nvertices]]   sampler interrupts charged to the vertex
 * [uint64 calls    [nvertices]]   MPI calls made at the vertex
 * [uint64 time_ns  [nvertices]]   exact nanoseconds inside MPI calls made at the vertex
 * [uint64 wait_ns  [nvertices]]   the part of time_ns spent in calls that block on other ranks
 * [uint64 counters [ncounters][nvertices]]   counter deltas charged at each sample
 * [uint64 sample_ns    [nvertices]]  CPU nanoseconds charged by the samples: each sample gets the
 *                                    CPU time of its thread (itimer: of the process) since the previous one
 * [uint64 comp_wall_ns [nvertices]]  MPI vertices: wall ns from the thread's previous MPI call's return
 *                                    (first call: from the shim's start) to each call made here, summed
 * [uint64 comp_cpu_ns  [nvertices]]  the same intervals in thread-CPU ns
 * [uint64 mpi_cpu_ns   [nvertices]]  thread-CPU ns inside the MPI calls made at the vertex
 * [struct sg_dep_record  [ndeps]]
 * [struct sg_comm_record [ncomms]]
 * [int32  members  [nmembers]]    world ranks of each communicator, in comm-rank order
 * [struct sg_thread_section]       (format 3) OpenMP threads, counted while the OMPT tool ran (else 0, 0):
 * [struct sg_thread_info [nthreads]]  one per thread (pool slot): role, team index, idle/spin time
 * [struct sg_thread_row  [nrows]]     its per-vertex values, rows with any value only (sparse: a
 *                                     thread's rows are at most nvertices, however long the run)
 * checksum: CRC-32 (zlib's) over the whole file with the checksum field set to 0. */
enum {
    SG_FILE_VERSION = 3,       /* 3: the OpenMP thread section; version 2 files (without it) still load */
    SG_THREAD_ARRAYS = 4,      /* per-thread [nvertices] arrays: samples, cpu_ns, mpi_ns, barrier_ns */
    SG_ROLE_MASTER = 1,        /* sg_thread_info.role: ran implicit tasks as thread 0 (or is the initial thread) */
    SG_ROLE_WORKER = 2,        /* an OpenMP worker thread */
    SG_ROLE_OTHER = 3,         /* another thread the OpenMP runtime reported */
    SG_VERTEX_ARRAYS = 8,      /* uint64 [nvertices] arrays besides the counters */
    SG_MAX_COUNTERS = 4,
    SG_NAME_LEN = 32,
    SG_FLAG_FINALIZED = 1,   /* written by MPI_Finalize */
    SG_FLAG_AT_EXIT = 2,     /* written at exit without MPI_Finalize */
    SG_FLAG_SIGTERM = 4,     /* written by the SIGTERM handler */
    SG_FLAG_ABORT = 8,       /* written by MPI_Abort */
    SG_FLAG_SAMPLING_OFF = 16, /* the program owns the sampler's signal (or ITIMER_PROF): samples stopped */
    SG_FLAG_DEPS_DROPPED = 32, /* the dependence table was full; some tuples were not recorded */
    SG_FLAG_TSC = 64,          /* MPI times were read through the calibrated TSC (else clock_gettime) */
    SG_SAMPLER_OFF = 0,        /* sg_file_header.sampler: no sampling */
    SG_SAMPLER_TASK_CLOCK = 1, /* per-thread perf_event task-clock (hrtimer on the thread's own CPU time) */
    SG_SAMPLER_ITIMER = 2      /* the ITIMER_PROF fallback (tick-driven, biased; rate capped by the tick) */
};

struct sg_file_header {
    char magic[8];              /* "SGPROF\0\0" */
    uint32_t version;           /* SG_FILE_VERSION */
    uint32_t header_size;       /* sizeof(struct sg_file_header) */
    uint64_t checksum;
    uint64_t file_size;
    int32_t rank, nranks;
    uint32_t nvertices, ncounters;
    uint32_t ndeps, ncomms;
    uint32_t nmembers, flags;
    uint64_t deps_dropped;      /* dependence records that did not fit */
    double hz;                  /* sampling rate asked for, 0 when sampling was off */
    double comm_sample;         /* probability with which a message is recorded as a dependence */
    double start_time, end_time;          /* seconds since the epoch (CLOCK_REALTIME) */
    double clock_offset_init, clock_offset_final; /* this rank's CLOCK_MONOTONIC minus rank 0's, seconds */
    double clock_rtt_init, clock_rtt_final;       /* round trip of the best ping-pong, seconds */
    char psg_hash[32];
    char host[64];
    char mpi_library[256];
    char counter_names[4][32];
    uint32_t sampler;           /* SG_SAMPLER_*: the sampler that ran */
    int32_t signo;              /* signal the task-clock sampler used, 0 if none */
    uint32_t cores;             /* CPUs in this rank's affinity mask (sched_getaffinity) */
    uint32_t ranks_on_host;     /* ranks of the run sharing this host (MPI_COMM_TYPE_SHARED), 0 if unknown */
    double hz_delivered;        /* samples per second of process CPU time while the sampler ran */
    double sampled_cpu;         /* those process CPU seconds */
};

struct sg_dep_record {          /* same layout as scalgraph.model.profile.DEP_DTYPE */
    int32_t rank, vertex, kind, peer, tag, comm;
    int64_t count, bytes;
    double wait;
};

struct sg_comm_record {
    int32_t id, size;
    uint32_t offset;            /* index of its first member in the members array */
    uint32_t reserved;
};

struct sg_thread_section {
    char magic[8];              /* "SGTHRD\0\0" */
    uint32_t nthreads, nrows;
};

struct sg_thread_info {         /* same layout as scalgraph.io.profile_file.THREAD_INFO_DTYPE */
    int32_t slot;               /* the shim's thread slot (a slot a finished thread gave back is reused) */
    uint32_t role;              /* SG_ROLE_* */
    int32_t team_index;         /* thread number in the last team it worked in (omp_get_thread_num) */
    uint32_t reserved;
    uint64_t tasks;             /* implicit tasks (parallel regions) it ran */
    uint64_t idle_ns;           /* a worker's wall time outside implicit tasks (no parallel region to work in) */
    uint64_t spin_ns;           /* CPU its samples charged while it waited at a barrier (not in cpu_ns) */
};

struct sg_thread_row {          /* same layout as scalgraph.io.profile_file.THREAD_ROW_DTYPE */
    uint32_t thread;            /* index into the sg_thread_info records */
    uint32_t vertex;
    uint64_t samples;           /* samples taken on this thread here (not while waiting at a barrier) */
    uint64_t cpu_ns;            /* thread CPU those samples were charged */
    uint64_t mpi_ns;            /* wall time of the MPI calls this thread made here */
    uint64_t barrier_ns;        /* wall time it waited at OpenMP barriers that began here */
};

/* ---- MPI-free core, exported for the PMPI layer and for unit tests through cffi ---- */
void sg_core_init(int32_t rank, int32_t nranks);
uint32_t sg_current_vertex(void);
void sg_set_cur(uint32_t local);
uint32_t sg_get_cur(void);
void sg_record_mpi(uint32_t vertex, uint64_t ns, int waiting);
void sg_record_dep(uint32_t vertex, int32_t kind, int32_t peer, int32_t tag, int32_t comm,
                   int64_t bytes, uint64_t wait_ns);
int32_t sg_comm_add(const int32_t *members, int32_t n);      /* returns the comm index, -1 if full */
int32_t sg_comm_id(int32_t comm_index);
int32_t sg_comm_world_rank(int32_t comm_index, int32_t rank); /* -1 if unknown */
void sg_sample_now(void);                 /* a sample: this thread's CPU time since its previous one */
void sg_sample_charge(uint64_t cpu_ns);   /* a sample charged cpu_ns (test hook) */
void sg_record_comp(uint32_t vertex, uint64_t comp_wall_ns, uint64_t comp_cpu_ns, uint64_t mpi_cpu_ns);
int sg_write_profile(const char *dir, uint32_t flags);
/* SG_CDEF_END */

extern __thread uint32_t sg_cur;

#ifdef __cplusplus
}
#endif
#endif
