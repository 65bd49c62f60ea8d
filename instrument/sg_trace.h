/* Trace mode (SCALGRAPH_TRACE=1): the raw per-rank event file and the hooks the wrappers call.
 * Internal to the shim (not part of the cffi cdef); scalgraph/io/trace_shim.py reads the file.
 *
 * File <SCALGRAPH_OUT>/rank-<r>.sgt (little-endian), written through rank-<r>.sgt.tmp<pid> and
 * renamed when MPI_Finalize is done, so it is complete or absent:
 *   [struct sg_trace_file_header]
 *   [block [nblocks]]                          events in the order they happened on the main thread
 *   [char names[nnames][SG_TRACE_NAME_LEN]]    MPI routine names; an event's `region` indexes them
 *   [samples_bytes bytes of varints]           per SIGPROF sample of the thread, the zigzag varints of
 *                                              its time and vertex minus the previous sample's (0, 0 first)
 *   [struct sg_trace_poll [npolls]]            unsuccessful polls per call site (not in the events)
 *   [struct sg_trace_file_trailer]
 * A block is [struct sg_trace_block_header] [uint8 kind[nevents]] [uint8 mask[nevents]]
 * [nbytes bytes of varints]: per event, the zigzag varint of its time minus the previous event's
 * time (t_prev of the block for the first), then the zigzag varints of the fields whose bit is set in
 * its mask, in bit order (SG_TF_*).  A field whose bit is clear has its default: region -1, vertex 0,
 * peer -1, tag 0, comm -1, bytes 0, aux -1.  About 6 bytes per event instead of 48 (docs/trace-formats.md).
 * Times are CLOCK_MONOTONIC nanoseconds (the wrappers' timer, docs in sg_internal.h): immune to NTP
 * steps, and the same clock whose offsets to rank 0 the profile header records.
 *
 * Polls (MPI_Test*, MPI_Iprobe, MPI_Improbe) that record no event (nothing completed, nothing found)
 * are not events: their count and time go to the poll table of their call site, so a program that
 * polls in a loop writes a trace bounded by its communication (Score-P writes each one). */
#ifndef SG_TRACE_H
#define SG_TRACE_H
#include <stdint.h>
#include "sg_internal.h"

enum {
    SG_TRACE_VERSION = 2,
    SG_TRACE_NAME_LEN = 48,
    /* kinds 0..14 are scalgraph.model.trace.EVENT_KINDS; this one defines a window */
    SG_TEV_WINDOW_DEF = 15,    /* comm = window id, peer = communicator id */
    SG_TEV_ENTER = 0, SG_TEV_EXIT = 1, SG_TEV_SEND = 2, SG_TEV_RECV = 3, SG_TEV_ISEND = 4,
    SG_TEV_ISEND_COMPLETE = 5, SG_TEV_IRECV_REQUEST = 6, SG_TEV_IRECV = 7, SG_TEV_COLL_BEGIN = 8,
    SG_TEV_COLL_END = 9, SG_TEV_RMA_PUT = 10, SG_TEV_RMA_GET = 11, SG_TEV_RMA_ACC = 12,
    SG_TEV_RMA_SYNC = 13, SG_TEV_REQUEST_CANCELLED = 14
};

/* field bits of an event's mask, in the order their varints follow the time delta */
enum { SG_TF_REGION = 1, SG_TF_VERTEX = 2, SG_TF_PEER = 4, SG_TF_TAG = 8, SG_TF_COMM = 16, SG_TF_BYTES = 32,
       SG_TF_AUX = 64 };

struct sg_trace_block_header {   /* 16 bytes */
    uint32_t nevents, nbytes;    /* events in the block, bytes of varints after the kinds and masks */
    uint64_t t_prev;             /* time of the event before the block (0 for the first block) */
};

struct sg_trace_file_header {    /* 32 bytes */
    char magic[8];               /* "SGRAWTR\0" */
    uint32_t version, event_size;   /* event_size 0: events are variable-length (blocks) */
    int32_t rank, nranks;
    uint32_t header_size, reserved;
};

struct sg_trace_poll {           /* 24 bytes: one call site's polls that recorded no event */
    uint64_t calls, ns;          /* how many, and their time inside MPI */
    int32_t region;              /* MPI routine (index into the names) */
    uint32_t vertex;             /* PSG vertex of the call; 0xFFFFFFFF: sites beyond the table's size */
};

struct sg_trace_file_trailer {   /* 48 bytes */
    uint64_t nevents;
    uint32_t nnames, flushes;    /* flushes: times the buffer filled up and was written out */
    uint32_t dropped;            /* events lost because the file could not be written */
    uint32_t nsamples;           /* SIGPROF samples of the traced thread, after the names */
    uint32_t nblocks, npolls;
    uint32_t samples_bytes, reserved;
    char magic[8];               /* "SGRAWEND" */
};

extern int sg_trace_on SG_HIDDEN;   /* SCALGRAPH_TRACE=1 and this is the thread being traced */

/* MPI calls: enter/exit around the PMPI call; `rid` is a per-wrapper cache of the region index */
void sg_trace_mpi_enter(struct sg_thread *t, int32_t *rid, const char *name, uint32_t vertex,
                        uint64_t t_enter, uint64_t t_exit) SG_HIDDEN;
void sg_trace_mpi_exit(struct sg_thread *t) SG_HIDDEN;
/* an event inside the current MPI call: at its enter time (sends, posts, RMA) or exit time (the rest) */
void sg_trace_event(struct sg_thread *t, int kind, int32_t peer, int32_t tag, int32_t comm, int64_t bytes,
                    int64_t aux) SG_HIDDEN;
int64_t sg_trace_new_id(void) SG_HIDDEN;
/* a poll (MPI_Iprobe) found something: record the call although it recorded no event */
void sg_trace_poll_hit(struct sg_thread *t) SG_HIDDEN;
int sg_trace_traces(const struct sg_thread *t) SG_HIDDEN;   /* this thread's events are recorded */
/* Loop and other vertex changes are plain stores into sg_cur that the shim cannot see; the SIGPROF
 * sampler (signal handler, same thread) notes the vertex it found, and the converter splits the time
 * between two traced events among the vertices sampled in it (scalgraph/io/trace_shim.py). */
struct sg_trace_sample {
    uint64_t time_ns;
    uint32_t vertex, reserved;
};
void sg_trace_sample(const struct sg_thread *t, uint32_t vertex) SG_HIDDEN;   /* async-signal-safe */
/* function instances (sg_fn_enter/exit) */
void sg_trace_function(struct sg_thread *t, int kind, uint32_t vertex) SG_HIDDEN;
/* the shim's part of MPI_Finalize is done (entered at t_enter): write the rest and rename the file */
void sg_trace_finalize(struct sg_thread *t, uint32_t vertex, uint64_t t_enter) SG_HIDDEN;

/* A rank's trace file (rank-<r>.sgt, rank-<r>.sgomp), written through an exclusive temporary name and
 * renamed when complete, so it is complete or absent.  Start with SG_TRACE_FILE_INIT. */
struct sg_trace_file {
    int fd, failed;
    char tmp_name[4096], final_name[4096];
};
#define SG_TRACE_FILE_INIT {.fd = -1}
/* <SCALGRAPH_OUT>/rank-<r>.<ext>: the descriptor, or -1 (and `failed` set) */
int sg_trace_file_open(struct sg_trace_file *f, const char *ext) SG_HIDDEN;
/* all n bytes, or `failed` set (and nothing more written) */
void sg_trace_file_write(struct sg_trace_file *f, const void *p, size_t n) SG_HIDDEN;
/* close and rename; after any failure the temporary file is removed and the user told (`what`: "trace") */
void sg_trace_file_commit(struct sg_trace_file *f, const char *what) SG_HIDDEN;

/* OpenMP (sg_trace_omp.c): per-thread records of the OMPT events and of the workers' samples, written
 * to rank-<r>.sgomp (layout there); kinds as scalgraph/io/trace_omp.py reads them */
enum { SG_TOMP_FORK = 1, SG_TOMP_JOIN = 2, SG_TOMP_TASK_BEGIN = 3, SG_TOMP_TASK_END = 4, SG_TOMP_BARRIER_BEGIN = 5,
       SG_TOMP_BARRIER_END = 6, SG_TOMP_LOCK_WAIT = 7, SG_TOMP_LOCK_ACQUIRED = 8, SG_TOMP_LOCK_RELEASED = 9,
       SG_TOMP_SAMPLE = 10 };
int sg_trace_omp_enabled(void) SG_HIDDEN;                       /* SCALGRAPH_TRACE=1 */
void sg_trace_omp_event(int kind, uint64_t arg) SG_HIDDEN;     /* from the OMPT callbacks, any thread */
void sg_trace_omp_sample(uint32_t vertex) SG_HIDDEN;           /* async-signal-safe */
void sg_trace_omp_finalize(void) SG_HIDDEN;
void sg_trace_omp_register(int (*set_callback)(int, void (*)(void))) SG_HIDDEN;

#endif
