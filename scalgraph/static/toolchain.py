"""Finding the compilers and the MPI the wrappers drive.

Two things are needed per language: the user's MPI compiler wrapper (mpicc/mpicxx/mpifort), only
for the include and link flags of its MPI (`-show` for MPICH, `--showme` for Open MPI), and a
compiler that emits LLVM bitcode with debug info (clang, zig's clang, flang).  Both come from the
environment first, so users keep their own MPI and compilers; the order is documented in
docs/user-guide/compile.md and docs/mpi-and-builds.md.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from scalgraph.errors import UserError

# Per language: (variables naming the MPI wrapper, wrapper names to look for,
#                variables naming the bitcode compiler, the MPI wrappers' own compiler variables)
MPI_WRAPPER_VARS = {"c": ("SCALGRAPH_MPICC", "MPICC"), "c++": ("SCALGRAPH_MPICXX", "MPICXX"),
                    "fortran": ("SCALGRAPH_MPIFC", "MPIFC", "MPIF90")}
MPI_WRAPPER_NAMES = {"c": ("mpicc",), "c++": ("mpicxx", "mpic++", "mpiCC"),
                     "fortran": ("mpifort", "mpif90", "mpif77")}
COMPILER_VARS = {"c": ("SCALGRAPH_CC",), "c++": ("SCALGRAPH_CXX",), "fortran": ("SCALGRAPH_FC",)}
WRAPPER_COMPILER_VARS = {"c": ("MPICH_CC", "OMPI_CC"), "c++": ("MPICH_CXX", "OMPI_CXX"),
                         "fortran": ("MPICH_FC", "MPICH_F90", "OMPI_FC")}
CLANG_NAMES = {"c": "clang", "c++": "clang++"}
ZIG_COMMANDS = {"c": "cc", "c++": "c++"}
FLANG_NAMES = ("flang-new-19", "flang-new", "flang-19", "flang")
# clang 15 made opaque pointers the default; older ones are not taken unasked (SCALGRAPH_CC takes any)
MIN_CLANG_MAJOR = 15
# zig's clang adds UBSan to debug builds unless told not to (shared/notes/toolchain.md)
ZIG_FLAGS = ["-fno-sanitize=all"]


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]                 # argv prefix, e.g. (python, -m, ziglang, cc)
    flags: tuple[str, ...] = ()              # always added (compile and link)
    origin: str = ""                         # where it came from, for messages


@dataclass(frozen=True)
class MPIFlags:
    wrapper: str
    compile: tuple[str, ...] = ()            # -I/-D from `-show`
    link: tuple[str, ...] = ()               # -L/-l/-Wl,... from `-show`, in order


@dataclass(frozen=True)
class Toolchain:
    lang: str
    compiler: Compiler                       # emits bitcode; also the link driver
    mpi: MPIFlags
    shim_mpicc: str                          # the MPI C wrapper of the same MPI (the shim is C)
    extra_compile: tuple[str, ...] = ()      # e.g. the directory of our Fortran `mpi` module
    extra_link: tuple[str, ...] = field(default=())


def _env_command(names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value, name
    return None


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def find_mpi_wrapper(lang: str) -> str:
    from scalgraph.static.guards import is_ourselves   # MPICC=sgcc would make sgcc run itself
    hit = _env_command(MPI_WRAPPER_VARS[lang])
    if hit and not is_ourselves(hit[0]):
        return hit[0]
    for name in MPI_WRAPPER_NAMES[lang]:
        candidate = _venv_bin() / name
        if candidate.is_file() and os.access(candidate, os.X_OK) and not is_ourselves(str(candidate)):
            return str(candidate)
    for name in MPI_WRAPPER_NAMES[lang]:
        found = shutil.which(name)
        if found and not is_ourselves(found):
            return found
    var = MPI_WRAPPER_VARS[lang][0]
    hint = ("install Debian's mpich and libmpich-dev (pip's mpich has no Fortran)" if lang == "fortran"
            else "pip install mpich (or bash scripts/setup.sh)")
    raise UserError(f"no MPI compiler wrapper ({'/'.join(MPI_WRAPPER_NAMES[lang])}) found: {hint}, "
                    f"or set {var} to yours")


FACTS_FILE = "toolchain-facts.json"


def _facts_path() -> Path:
    """Beside the shim and the Fortran module (scalgraph/runtime/shim.py's cache directory)."""
    return Path(os.environ.get("SCALGRAPH_CACHE") or Path.home() / ".cache" / "scalgraph") / FACTS_FILE


@functools.lru_cache(maxsize=None)
def _stored_facts() -> dict:
    try:
        data = json.loads(_facts_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _remembered(key: str, compute):
    """compute(), remembered across calls in a small JSON file: make runs sgcc once per file, and
    asking each clang its version cost a process start every time.  Keys name what the answer
    depends on (a binary's path, size and mtime), so a changed tool is asked again."""
    facts = _stored_facts()
    if key in facts:
        return facts[key]
    value = compute()
    facts[key] = value
    path = _facts_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".facts-")
        with os.fdopen(fd, "w") as f:
            json.dump(dict(list(facts.items())[-200:]), f)
        os.replace(tmp, path)              # atomic: parallel makes never read half a file
    except OSError:
        pass                               # no cache: only slower
    return value


def _binary_key(path: str) -> str | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def _clang_major(command: list[str]) -> int | None:
    def ask() -> int | None:
        try:
            out = subprocess.run(command + ["--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        m = re.search(r"clang version (\d+)", out)
        return int(m.group(1)) if m else None
    binary = _binary_key(command[0]) if len(command) == 1 else None
    return _remembered(f"clang-major:{binary}", ask) if binary else ask()


def _llvmlite_major() -> int:
    import llvmlite                # the package alone is cheap; its binding loads LLVM (50 ms)

    def ask() -> int:
        from llvmlite import binding
        return binding.llvm_version_info[0]
    return _remembered(f"llvmlite-llvm-major:{llvmlite.__version__}:{os.path.dirname(llvmlite.__file__)}", ask)


def system_clang(lang: str) -> str | None:
    """A clang on PATH whose bitcode llvmlite reads, preferred to zig's: it compiles about 3x faster
    (zig's clang driver is slow to start and builds its own libc++) and links with the system's C++
    library, as the plain build does.  Its LLVM major must not be newer than llvmlite's (newer bitcode
    does not parse) nor older than MIN_CLANG_MAJOR (opaque pointers, what the static pass was tested
    with); Debian's clang-<N> names first, the newest fitting one, then plain `clang`."""
    top = _llvmlite_major()
    names = [f"{CLANG_NAMES[lang]}-{v}" for v in range(top, MIN_CLANG_MAJOR - 1, -1)] + [CLANG_NAMES[lang]]
    for name in names:
        path = shutil.which(name)
        if path and MIN_CLANG_MAJOR <= (_clang_major([path]) or 0) <= top:
            return path
    return None


@functools.lru_cache(maxsize=None)
def _find_compiler_cached(lang: str, environment: tuple) -> Compiler:
    return _find_compiler(lang)


def backend_for(compiler: Compiler) -> tuple[str, ...] | None:
    """A clang that can compile the instrumented bitcode (llvmlite writes its own LLVM version, which
    only a clang of the same major reads), or None: llvmlite's own code generator does it then.
    The compiler that made the bitcode if it is such a clang, else clang-<llvmlite major> on PATH."""
    major = _llvmlite_major()
    if compiler.origin != "ziglang" and len(compiler.command) == 1 and _clang_major(list(compiler.command)) == major:
        return compiler.command
    found = shutil.which(f"clang-{major}")
    return (found,) if found and _clang_major([found]) == major else None


def find_compiler(lang: str) -> Compiler:
    """The compiler for `lang`, looked up once per process and environment (the link step asks
    again for the C compiler of the tables object)."""
    names = (*COMPILER_VARS[lang], *WRAPPER_COMPILER_VARS[lang], "PATH")
    return _find_compiler_cached(lang, tuple(os.environ.get(n) for n in names))


def _find_compiler(lang: str) -> Compiler:
    hit = _env_command(COMPILER_VARS[lang])
    if hit:                                   # the user's choice, taken as is
        return Compiler(tuple(shlex.split(hit[0])), origin=hit[1])
    if lang == "fortran":
        return _find_flang()
    hit = _env_command(WRAPPER_COMPILER_VARS[lang])
    if hit and _clang_major(shlex.split(hit[0])) is not None:
        return Compiler(tuple(shlex.split(hit[0])), origin=hit[1])
    clang = system_clang(lang)
    if clang:
        return Compiler((clang,), origin="PATH")
    import importlib.util            # only here: the usual path never needs it
    if importlib.util.find_spec("ziglang") is not None:
        return Compiler((sys.executable, "-m", "ziglang", ZIG_COMMANDS[lang]), tuple(ZIG_FLAGS),
                        origin="ziglang")
    raise UserError(f"no clang that emits LLVM bitcode found: pip install ziglang (or bash scripts/setup.sh), "
                    f"or set {COMPILER_VARS[lang][0]} to a clang")


def _find_flang() -> Compiler:
    hit = _env_command(WRAPPER_COMPILER_VARS["fortran"])
    if hit and "flang" in os.path.basename(shlex.split(hit[0])[0]):
        return Compiler(tuple(shlex.split(hit[0])), origin=hit[1])
    for name in FLANG_NAMES:
        found = shutil.which(name)
        if found:
            return Compiler((found,), origin="PATH")
    raise UserError("no flang found (Fortran needs flang-19 to emit LLVM IR): apt-get install flang-19 "
                    "(bash scripts/setup.sh does it as root), or set SCALGRAPH_FC to a flang")


@functools.lru_cache(maxsize=None)
def mpi_flags(wrapper: str) -> MPIFlags:
    """Include and link flags of the wrapper's MPI, from `-show` (MPICH) or `--showme` (Open MPI)."""
    from scalgraph.runtime.wrapper_show import wrapper_show
    words = None
    for option in ("-show", "--showme"):
        try:
            r = wrapper_show(tuple(shlex.split(wrapper)), option)    # asked once; the shim's key reuses it
        except OSError as e:
            raise UserError(f"cannot run the MPI compiler wrapper {wrapper}: {e.strerror}; "
                            "set MPICC (MPICXX, MPIFC) to a working one") from None
        if r.returncode == 0 and r.stdout.strip():
            words = shlex.split(r.stdout.strip().splitlines()[-1])
            break
    if not words:
        raise UserError(f"{wrapper} -show / --showme printed no compile command: is it an MPICH or "
                        "Open MPI compiler wrapper? Set MPICC (MPICXX, MPIFC) to one")
    return split_show_words(wrapper, words[1:])


def split_show_words(wrapper: str, words: list[str]) -> MPIFlags:
    """Keep what says where MPI is (-I/-D for compiling, -L/-l/-Wl/-pthread/files for linking); drop
    the wrapper's own build flags (e.g. Debian's gfortran-only -fallow-invalid-boz)."""
    compile_flags: list[str] = []
    link_flags: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("-I", "-D", "-isystem") and i + 1 < len(words):
            compile_flags += [w, words[i + 1]]
            i += 1
        elif w.startswith(("-I", "-D")):
            compile_flags.append(w)
        elif w in ("-L", "-l", "-Xlinker") and i + 1 < len(words):
            link_flags += [w, words[i + 1]]
            i += 1
        elif w.startswith(("-L", "-l", "-Wl,")) or w in ("-pthread", "-lpthread"):
            link_flags.append(w)
            if w == "-pthread":
                compile_flags.append(w)
        elif not w.startswith("-"):
            link_flags.append(w)            # a library named by path
        i += 1
    return MPIFlags(wrapper, tuple(compile_flags), tuple(link_flags))


def shim_mpicc_for(lang: str, wrapper: str) -> str:
    """The C wrapper of the same MPI as `wrapper` (the shim is C and must match the MPI exactly)."""
    if lang != "fortran":
        return wrapper if lang == "c" else _sibling(wrapper, ("mpicxx", "mpic++", "mpiCC")) or find_mpi_wrapper("c")
    return _sibling(wrapper, ("mpifort", "mpif90", "mpif77")) or find_mpi_wrapper("c")


def _sibling(wrapper: str, names: tuple[str, ...]) -> str | None:
    path = shutil.which(shlex.split(wrapper)[0]) if wrapper else None
    if not path:
        return None
    base = os.path.basename(path)
    for name in names:
        if base.startswith(name):
            candidate = os.path.join(os.path.dirname(path), "mpicc" + base[len(name):])
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def with_library_dirs_of(flags: MPIFlags, c_flags: MPIFlags) -> MPIFlags:
    """Add the C wrapper's -L directories: Debian's mpifort.openmpi names no directory that holds
    libmpi.so, so `-lmpi` found /usr/lib/<arch>/libmpi.so, which the `mpi` alternative may point at
    MPICH: one program with both MPIs.  The C wrapper's directory is the shim's MPI, the right one."""
    dirs = [w for w in c_flags.link if w.startswith("-L") and len(w) > 2 and w not in flags.link]
    return MPIFlags(flags.wrapper, flags.compile, (*dirs, *flags.link)) if dirs else flags


def find_toolchain(lang: str, linking: bool = True) -> Toolchain:
    """linking=False (a -c call): the C sibling's -L directories are left out, as is the question
    (`mpicc -show`, a shell script) that finds them; only a link uses them."""
    compiler = find_compiler(lang)
    wrapper = find_mpi_wrapper(lang)
    flags = mpi_flags(wrapper)
    shim_mpicc = shim_mpicc_for(lang, wrapper)
    if shim_mpicc != wrapper and linking:
        flags = with_library_dirs_of(flags, mpi_flags(shim_mpicc))
    tc = Toolchain(lang, compiler, flags, shim_mpicc)
    if lang == "fortran":
        from scalgraph.static.fortran_mpi import mpi_module
        moddir, modobj = mpi_module(compiler, flags)
        tc = Toolchain(lang, compiler, flags, tc.shim_mpicc, ("-I", moddir), (modobj,))
    return tc
