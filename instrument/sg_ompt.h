/* The part of the OpenMP 5.x tools interface (OMPT, OpenMP API 5.1 §4.4, §19.5) the shim uses.
 * Declared here rather than included from <omp-tools.h>: the shim is built by the MPI's own mpicc,
 * often gcc, which does not ship that header.  Values and layouts are the specification's ABI. */
#ifndef SG_OMPT_H
#define SG_OMPT_H
#include <stdint.h>

typedef union ompt_data_t { uint64_t value; void *ptr; } ompt_data_t;
typedef void (*ompt_interface_fn_t)(void);
typedef ompt_interface_fn_t (*ompt_function_lookup_t)(const char *interface_function_name);
typedef void (*ompt_callback_t)(void);
typedef int (*ompt_initialize_t)(ompt_function_lookup_t lookup, int initial_device_num, ompt_data_t *tool_data);
typedef void (*ompt_finalize_t)(ompt_data_t *tool_data);
typedef struct ompt_start_tool_result_t {
    ompt_initialize_t initialize;
    ompt_finalize_t finalize;
    ompt_data_t tool_data;
} ompt_start_tool_result_t;
typedef int (*ompt_set_callback_t)(int event, ompt_callback_t callback);   /* returns ompt_set_result_t */

enum {
    ompt_callback_thread_begin = 1,
    ompt_callback_thread_end = 2,
    ompt_callback_parallel_begin = 3,
    ompt_callback_parallel_end = 4,
    ompt_callback_implicit_task = 7,
    ompt_callback_sync_region_wait = 16,
    ompt_callback_sync_region = 23,
};
enum { ompt_set_never = 1 };                       /* ompt_set_result_t: 0 error, 1 never, >1 some/always */
enum { ompt_scope_begin = 1, ompt_scope_end = 2 };
enum { ompt_thread_initial = 1, ompt_thread_worker = 2, ompt_thread_other = 3 };
enum { ompt_task_initial = 0x1, ompt_task_implicit = 0x2 };
enum {
    ompt_sync_region_barrier = 1,
    ompt_sync_region_barrier_implicit = 2,
    ompt_sync_region_barrier_explicit = 3,
    ompt_sync_region_barrier_implementation = 4,
    ompt_sync_region_barrier_implicit_workshare = 8,
    ompt_sync_region_barrier_implicit_parallel = 9,
};

/* the shim's side (sg_ompt.c): OpenMP workers' CPU since the previous call, for sg_mpi_leave */
uint64_t sg_ompt_take_worker_cpu(void) __attribute__((visibility("hidden")));

ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *runtime_version);
#endif
