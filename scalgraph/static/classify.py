"""What a called name is: an MPI routine, a library/intrinsic function (plain computation), or
possibly user code (kept as a CALL until the link step knows better)."""
from __future__ import annotations

import re

_MPI = re.compile(r'^p?mpi_', re.IGNORECASE)

# C/POSIX/libm names that are never user code; calls to them are computation.  Unknown external
# names are kept conservatively as CALL vertices and dropped at link time, so this list only saves
# probes, it does not decide correctness.
_LIBC = set("""
printf fprintf sprintf snprintf vprintf vfprintf vsnprintf puts fputs putchar fputc fwrite fread
fopen fclose fflush fseek ftell rewind fgets fgetc getc scanf fscanf sscanf perror remove rename
malloc calloc realloc free posix_memalign aligned_alloc memalign memcpy memmove memset memcmp
strlen strcpy strncpy strcat strncat strcmp strncmp strchr strrchr strstr strdup strtok strtol
strtoul strtoll strtod strtof atoi atol atof abs labs llabs div exit _exit abort atexit qsort
bsearch rand srand rand_r random srandom drand48 srand48 erand48 getenv setenv time clock
gettimeofday clock_gettime nanosleep usleep sleep sched_yield getpid gethostname sysconf
sqrt sqrtf cbrt pow powf exp expf exp2 log logf log2 log10 sin sinf cos cosf tan tanf asin acos
atan atan2 sinh cosh tanh floor floorf ceil ceilf fabs fabsf fmod fmodf round lround trunc fmin
fmax fma hypot erf erfc ldexp frexp modf isnan isinf
pthread_create pthread_join pthread_mutex_lock pthread_mutex_unlock omp_get_wtime
omp_get_thread_num omp_get_num_threads
""".split())

_LIB_PREFIXES = ("llvm.", "__", "_ZNSt", "_ZSt", "_ZNKSt", "_ZdlPv", "_ZdaPv", "_Znwm", "_Znam",
                 "_ZN9__gnu_cxx", "_ZNK9__gnu_cxx", "_Fortran", "_FortranA", "_QQEnvironment",
                 "_Unwind", "_GLOBAL__", "__cxx_global", "_ZTv", "_ZThn", "__kmpc_", "omp_")

_SYSTEM_DIRS = ("/usr/",)
_SYSTEM_PARTS = ("/site-packages/", "/ziglang/", "/lib/clang/", "/libcxx/", "/libc/include/")


def is_mpi(name: str) -> bool:
    return bool(_MPI.match(name))


def mpi_display_name(name: str) -> str:
    """MPI_Send for MPI_Send, PMPI_Send, mpi_send_ and mpi_send__ alike."""
    base = re.sub(r'^p?mpi_', '', name, flags=re.IGNORECASE).rstrip("_")
    if base.endswith(("_f08", "_f08ts", "_c")):
        base = base.rsplit("_", 1)[0]
    return "MPI_" + base[:1].upper() + base[1:].lower() if base else "MPI"


def is_library(name: str) -> bool:
    return name in _LIBC or name.startswith(_LIB_PREFIXES)


def is_system_file(path: str) -> bool:
    """Headers of the compiler, libc and libc++: their inline functions are library code."""
    return path.startswith(_SYSTEM_DIRS) or any(p in path for p in _SYSTEM_PARTS)
