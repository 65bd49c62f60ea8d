/* The per-rank profile file (layout in scalgraph.h) and the ways out of a program that write it:
 * MPI_Finalize (sg_mpi.c), exit without Finalize (atexit), SIGTERM, MPI_Abort.
 * Only open/write/pwrite/rename/mkdir are used, so writing from the SIGTERM handler is safe enough. */
#include "sg_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { OUT_BUF = 1 << 16, DEP_MAX = 1 << 14 };

struct out {
    int fd;
    int failed;
    uint32_t crc;
    size_t used;
    unsigned char buf[OUT_BUF];
};
static struct out out_;
static struct sg_dep_record dep_buf_[DEP_MAX];

static void out_flush(struct out *o) {
    size_t off = 0;
    while (off < o->used && !o->failed) {
        ssize_t n = write(o->fd, o->buf + off, o->used - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            o->failed = 1;
        else
            off += (size_t)n;
    }
    o->used = 0;
}

/* CRC-32 (the zlib polynomial, so Python checks it with zlib.crc32) */
static uint32_t crc_table_[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table_[n] = c;
    }
}

static void out_put(struct out *o, const void *data, size_t len) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        o->crc = crc_table_[(o->crc ^ p[i]) & 0xff] ^ (o->crc >> 8);
        if (o->used == OUT_BUF)
            out_flush(o);
        o->buf[o->used++] = p[i];
    }
}

static char *append(char *dst, const char *end, const char *s) {
    while (*s && dst < end)
        *dst++ = *s++;
    *dst = 0;
    return dst;
}

static char *append_uint(char *dst, const char *end, unsigned long v) {
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && dst < end)
        *dst++ = digits[--n];
    *dst = 0;
    return dst;
}

static int make_dirs(const char *dir) {
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path)
        return -1;
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (path[i] == '/' || path[i] == 0) {
            char c = path[i];
            path[i] = 0;
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return -1;
            path[i] = c;
        }
    return 0;
}

const char *sg_out_dir(void) {
    const char *d = getenv("SCALGRAPH_OUT");
    return (d && *d) ? d : "scalgraph-profile";
}

/* A program run outside `scalgraph run` (no SCALGRAPH_OUT) writes nothing unless asked with
 * SCALGRAPH_PROFILE=1: builds and test suites of sgcc-built programs must not fill up with folders. */
int sg_output_wanted(void) {
    const char *d = getenv("SCALGRAPH_OUT");
    const char *p = getenv("SCALGRAPH_PROFILE");
    return (d && *d) || (p && strcmp(p, "1") == 0);
}

/* Exclusive, unpredictable temporary file beside `final`: <final>.tmp.<pid>.<random>, created with
 * O_EXCL|O_NOFOLLOW, so a symlink or file planted under a guessable name is never followed or reused.
 * Only syscalls (getrandom, clock_gettime, open): callable from a signal handler.  The name goes to
 * tmp (cap bytes); returns the descriptor or -1. */
int sg_open_temp(const char *final, char *tmp, size_t cap) {
    static uint64_t counter;
    for (int attempt = 0; attempt < 16; attempt++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)(uintptr_t)&ts << 7);
        }
        r ^= __atomic_add_fetch(&counter, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
        char *e = append(tmp, tmp + cap - 1, final);
        e = append(e, tmp + cap - 1, ".tmp.");
        e = append_uint(e, tmp + cap - 1, (unsigned long)getpid());
        e = append(e, tmp + cap - 1, ".");
        for (int i = 0; i < 16 && e < tmp + cap - 1; i++, r >>= 4)
            *e++ = "0123456789abcdef"[r & 15];
        *e = 0;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static void fill_header(struct sg_file_header *h, uint32_t flags, uint32_t nv, uint32_t ndeps, uint64_t thread_bytes) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, "SGPROF\0\0", 8);
    h->version = SG_FILE_VERSION;
    h->header_size = sizeof *h;
    h->rank = sg_run.rank;
    h->nranks = sg_run.nranks;
    h->nvertices = nv;
    h->ncounters = sg_counter_count();
    h->ndeps = ndeps;
    h->ncomms = sg_comm_count();
    h->nmembers = sg_member_count();
    h->flags = flags | (sg_run.sampling_off ? SG_FLAG_SAMPLING_OFF : 0) |
               (sg_deps_dropped ? SG_FLAG_DEPS_DROPPED : 0) | (sg_tsc.usable ? SG_FLAG_TSC : 0);
    h->deps_dropped = sg_deps_dropped;
    h->hz = sg_run.hz;
    h->comm_sample = sg_run.comm_sample;
    h->start_time = sg_run.start_time;
    h->end_time = sg_run.end_time ? sg_run.end_time : sg_wall_seconds();
    h->clock_offset_init = sg_run.clock_offset_init;
    h->clock_offset_final = sg_run.clock_offset_final;
    h->clock_rtt_init = sg_run.clock_rtt_init;
    h->clock_rtt_final = sg_run.clock_rtt_final;
    strncpy(h->psg_hash, sg_psg_hash(), sizeof h->psg_hash - 1);
    memcpy(h->host, sg_run.host, sizeof h->host - 1);
    memcpy(h->mpi_library, sg_run.mpi_library, sizeof h->mpi_library - 1);
    for (uint32_t i = 0; i < h->ncounters; i++)
        strncpy(h->counter_names[i], sg_counter_name(i), SG_NAME_LEN - 1);
    h->sampler = sg_run.sampler;
    h->signo = sg_run.sampler == SG_SAMPLER_TASK_CLOCK ? sg_run.signo : 0;
    h->cores = sg_run.cores;
    h->ranks_on_host = sg_run.ranks_on_host;
    h->hz_delivered = sg_run.hz_delivered;
    h->sampled_cpu = sg_run.sampled_cpu;
    h->file_size = sizeof *h + (uint64_t)nv * 8 * (SG_VERTEX_ARRAYS + h->ncounters) +
                   (uint64_t)ndeps * sizeof(struct sg_dep_record) +
                   (uint64_t)h->ncomms * sizeof(struct sg_comm_record) + (uint64_t)h->nmembers * 4 + thread_bytes;
}

static void put_out(const void *data, size_t len) { out_put(&out_, data, len); }

/* Write <dir>/rank-<r>.sgp through a temporary name, so the file is complete or absent.
 * Returns 0 on success. A forked child (other pid) never writes. */
int sg_write_profile(const char *dir, uint32_t flags) {
    static char busy;
    if (sg_run.pid && sg_run.pid != (int)getpid())
        return -1;
    if (__atomic_test_and_set(&busy, __ATOMIC_ACQUIRE))
        return -1;   /* a signal arrived while writing: the first writer finishes */
    if (dir == NULL && !sg_output_wanted()) {
        __atomic_clear(&busy, __ATOMIC_RELEASE);
        return -1;   /* not asked for: no litter */
    }
    if (dir == NULL)
        dir = sg_out_dir();
    char final_name[4200], tmp_name[4300];
    char *e = append(final_name, final_name + 4096, dir);
    e = append(e, final_name + sizeof final_name - 1, "/rank-");
    e = append_uint(e, final_name + sizeof final_name - 1, (unsigned long)sg_run.rank);
    append(e, final_name + sizeof final_name - 1, ".sgp");
    tmp_name[0] = 0;

    int rc = -1;
    if (make_dirs(dir) != 0)
        goto failed;
    struct out *o = &out_;
    o->fd = sg_open_temp(final_name, tmp_name, sizeof tmp_name);
    if (o->fd < 0)
        goto failed;
    o->failed = 0;
    o->used = 0;
    if (crc_table_[1] == 0)
        crc_init();
    o->crc = 0xFFFFFFFFu;

    uint32_t nv = sg_nvertices();
    uint32_t ndeps = sg_dep_snapshot(dep_buf_, DEP_MAX);
    uint32_t nthreads, nthread_rows;
    sg_threads_count(&nthreads, &nthread_rows);
    struct sg_file_header h;
    fill_header(&h, flags, nv, ndeps, sg_threads_section_size(nthreads, nthread_rows));
    out_put(o, &h, sizeof h);
    out_put(o, sg_samples, (size_t)nv * 8);
    out_put(o, sg_calls, (size_t)nv * 8);
    out_put(o, sg_time_ns, (size_t)nv * 8);
    out_put(o, sg_wait_ns, (size_t)nv * 8);
    out_put(o, sg_counter_vals, (size_t)nv * 8 * h.ncounters);
    out_put(o, sg_sample_ns, (size_t)nv * 8);
    out_put(o, sg_comp_wall_ns, (size_t)nv * 8);
    out_put(o, sg_comp_cpu_ns, (size_t)nv * 8);
    out_put(o, sg_mpi_cpu_ns, (size_t)nv * 8);
    out_put(o, dep_buf_, (size_t)ndeps * sizeof(struct sg_dep_record));
    for (uint32_t c = 0; c < h.ncomms; c++) {
        struct sg_comm_record r = sg_comm_records()[c];
        r.reserved = 0;
        out_put(o, &r, sizeof r);
    }
    out_put(o, sg_members(), (size_t)h.nmembers * 4);
    sg_threads_write(put_out, nthreads, nthread_rows);
    out_flush(o);
    uint64_t sum = (uint64_t)(o->crc ^ 0xFFFFFFFFu);
    if (!o->failed &&
        pwrite(o->fd, &sum, sizeof sum, offsetof(struct sg_file_header, checksum)) != sizeof sum)
        o->failed = 1;
    if (close(o->fd) != 0)
        o->failed = 1;
    if (o->failed || rename(tmp_name, final_name) != 0) {
        unlink(tmp_name);
        goto failed;
    }
    sg_run.written = 1;
    rc = 0;
    if (sg_run.rank == 0 && !(getenv("SCALGRAPH_OUT") && *getenv("SCALGRAPH_OUT"))) {
        /* asked for with SCALGRAPH_PROFILE=1 alone: say where the files went */
        char msg[4400];
        char *m = append(msg, msg + sizeof msg - 1, "scalgraph: profile written to ");
        m = append(m, msg + sizeof msg - 1, dir);
        m = append(m, msg + sizeof msg - 1, "/ (rank-<r>.sgp; set SCALGRAPH_OUT to choose the directory)\n");
        (void)!write(2, msg, (size_t)(m - msg));
    }
    goto done;
failed: {
    /* one line per process, with write(2) only: this may run in the SIGTERM handler */
    static int complained;
    if (complained++)
        goto done;
    char msg[4400];
    char *m = append(msg, msg + sizeof msg - 1, "scalgraph: cannot write the profile ");
    m = append(m, msg + sizeof msg - 1, final_name);
    m = append(m, msg + sizeof msg - 1, "; set SCALGRAPH_OUT to a writable directory\n");
    (void)!write(2, msg, (size_t)(m - msg));
}
done:
    __atomic_clear(&busy, __ATOMIC_RELEASE);
    return rc;
}

static void write_at_exit(void) {
    if (sg_run.initialized && !sg_run.written) {
        sg_sampler_stop();
        sg_write_profile(NULL, SG_FLAG_AT_EXIT);
    }
}

static void on_sigterm(int sig) {
    if (sg_run.initialized && !sg_run.written) {
        sg_sampler_stop();
        sg_write_profile(NULL, SG_FLAG_SIGTERM);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void sg_install_exit_handlers(void) {
    atexit(write_at_exit);
    struct sigaction old;
    if (sigaction(SIGTERM, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigterm;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);   /* the program's own handler, if any, is left alone */
    }
}

#ifndef SG_NO_AUTOSTART
__attribute__((constructor)) static void sg_start(void) {
    sg_run.pid = (int)getpid();
    sg_run.start_time = sg_wall_seconds();
    gethostname(sg_run.host, sizeof sg_run.host - 1);
    sg_run.cores = sg_affinity_cores();
    sg_cpu_clock_calibrate();
    sg_run.comm_sample = sg_env_number("SCALGRAPH_COMM_SAMPLE", 1.0, 0.0, 1.0);
    sg_thread_self();   /* the main thread gets pool slot 0 */
    sg_timer_calibrate();   /* first point; MPI_Init takes the second */
    sg_install_exit_handlers();
    sg_sampler_start();
}
#endif
