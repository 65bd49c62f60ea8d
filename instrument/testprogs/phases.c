/* Sampler bias and computation between MPI calls (benchmarks/bench_sampler_bias.py,
 * tests/test_shim_sampler.py): hand-written probes and PSG tables around rounds of
 *   {nanosleep SLEEP_US; phase A: A_US of CPU; phase B: B_US of CPU; MPI_Barrier}
 * with each phase on its own vertex, and the ground truth measured inside the program with
 * CLOCK_THREAD_CPUTIME_ID.
 *   usage: phases ROUNDS A_US B_US SLEEP_US [WORKER [steal|steal-sigset|cost]]
 * WORKER: the rank that computes (-1, the default: every rank); the others only join the barriers.
 * steal: after MPI_Init the program takes over the real-time signal the shim samples with (signal());
 * steal-sigset: the same with sigset(), which reaches the kernel without passing the shim's wrappers.
 * cost: also print the cost of a CLOCK_THREAD_CPUTIME_ID and a CLOCK_MONOTONIC read (ns).
 * Output, one line per rank:
 *   rank R a_ns A b_ns B between_cpu_ns C between_wall_ns W [stolen_signal S caught N] [...]
 * where C/W are the thread CPU / wall time from each round barrier's return to the next barrier's
 * entry of the computing rank (what the shim charges to the round barrier as computation).
 * Vertices (one instance of main; local = vertex id):
 *   0 main  1 Init  2 calibration  3 first Barrier  4 sleep  5 phase A  6 phase B  7 round Barrier
 *   8 clock costs  9 Finalize */
#define _GNU_SOURCE
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "scalgraph.h"

uint32_t __sg_fid_ph_main = 0xFFFFFFFFu;
static const uint32_t inst_base[] = {0};
static const uint32_t inst_func[] = {0};
static const uint32_t inst_vid[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
static const int32_t inst_callee[] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
static const uint32_t func_default_inst[] = {0};
static uint32_t *const fid_slots[] = {&__sg_fid_ph_main};
static const uint8_t vertex_kind[10] = {0};
static const struct sg_psg_tables tables = {"phases0000000000", 10, 1, 1, inst_base, inst_func, inst_vid,
                                            inst_callee, func_default_inst, fid_slots, vertex_kind};
__attribute__((constructor)) static void register_tables(void) { sg_register_psg(&tables); }

enum { V_INIT = 1, V_CALIB = 2, V_BARRIER0 = 3, V_SLEEP = 4, V_A = 5, V_B = 6, V_ROUND = 7, V_COST = 8,
       V_FINALIZE = 9 };

static uint64_t ns_of(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* pure user-mode work: a fixed number of iterations, so the CPU time does not depend on the load */
static volatile double sink;
__attribute__((noinline)) static void work(long n) {
    double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)(i % 7) * 0.5;
    sink = x;
}

static volatile long caught;
static void on_stolen(int sig) { (void)sig; caught++; }

/* the real-time signal with an SA_SIGINFO handler: the one the shim installed */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   /* sigset: chosen for bypassing the shim */
static int steal_signal(int by_sigset) {
    for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
        struct sigaction old;
        if (sigaction(s, NULL, &old) == 0 && (old.sa_flags & SA_SIGINFO)) {
            if (by_sigset)
                sigset(s, on_stolen);
            else
                signal(s, on_stolen);
            return s;
        }
    }
    return 0;
}

static double clock_cost(clockid_t c) {
    enum { N = 200000 };
    uint64_t t0 = ns_of(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++)
        ns_of(c);
    return (double)(ns_of(CLOCK_MONOTONIC) - t0) / N;
}

int main(int argc, char **argv) {
    sg_fn_enter(__sg_fid_ph_main);
    if (argc < 5)
        return 2;
    int rounds = atoi(argv[1]), worker = argc > 5 ? atoi(argv[5]) : -1;
    double a_us = atof(argv[2]), b_us = atof(argv[3]);
    long sleep_us = atol(argv[4]);
    const char *mode = argc > 6 ? argv[6] : "";
    int rank = 0;
    sg_cur = V_INIT;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int stolen = strncmp(mode, "steal", 5) == 0 ? steal_signal(strcmp(mode, "steal-sigset") == 0) : 0;
    int computes = worker < 0 || worker == rank;

    sg_cur = V_CALIB;   /* iterations per CPU microsecond */
    long calib = 20000000;
    uint64_t c0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
    work(calib);
    double per_us = (double)calib / (1e-3 * (double)(ns_of(CLOCK_THREAD_CPUTIME_ID) - c0));
    long a_iters = (long)(a_us * per_us), b_iters = (long)(b_us * per_us);

    sg_cur = V_BARRIER0;
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t a_ns = 0, b_ns = 0, between_cpu = 0, between_wall = 0;
    for (int r = 0; r < rounds; r++) {
        uint64_t w_start = ns_of(CLOCK_MONOTONIC), c_start = ns_of(CLOCK_THREAD_CPUTIME_ID);
        if (computes) {
            sg_cur = V_SLEEP;
            struct timespec z = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
            nanosleep(&z, NULL);
            uint64_t t0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
            sg_cur = V_A;
            work(a_iters);
            uint64_t t1 = ns_of(CLOCK_THREAD_CPUTIME_ID);
            sg_cur = V_B;
            work(b_iters);
            uint64_t t2 = ns_of(CLOCK_THREAD_CPUTIME_ID);
            a_ns += t1 - t0;
            b_ns += t2 - t1;
        }
        between_cpu += ns_of(CLOCK_THREAD_CPUTIME_ID) - c_start;
        between_wall += ns_of(CLOCK_MONOTONIC) - w_start;
        sg_cur = V_ROUND;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    char extra[128] = "";
    if (stolen)
        snprintf(extra, sizeof extra, " stolen_signal %d caught %ld", stolen, caught);
    if (strcmp(mode, "cost") == 0) {
        sg_cur = V_COST;
        snprintf(extra, sizeof extra, " thread_clock_ns %.1f monotonic_ns %.1f",
                 clock_cost(CLOCK_THREAD_CPUTIME_ID), clock_cost(CLOCK_MONOTONIC));
    }
    printf("rank %d a_ns %llu b_ns %llu between_cpu_ns %llu between_wall_ns %llu%s\n", rank,
           (unsigned long long)a_ns, (unsigned long long)b_ns, (unsigned long long)between_cpu,
           (unsigned long long)between_wall, extra);
    fflush(stdout);
    sg_cur = V_FINALIZE;
    MPI_Finalize();
    sg_fn_exit();
    return 0;
}
