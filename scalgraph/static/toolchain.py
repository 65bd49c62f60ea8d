"""Finding the compilers and the MPI the wrappers drive.

Two things are needed per language: the user's MPI compiler wrapper (mpicc/mpicxx/mpifort), only
for the include and link flags of its MPI (`-show` for MPICH, `--showme` for Open MPI), and a
compiler that emits LLVM bitcode with debug info (clang, zig's clang, flang).  Both come from the
environment first, so users keep their own MPI and compilers; the order is documented in the
README (section "Using your own MPI and compilers").
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
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


def _clang_major(command: list[str]) -> int | None:
    try:
        out = subprocess.run(command + ["--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"clang version (\d+)", out)
    return int(m.group(1)) if m else None


def _llvmlite_major() -> int:
    from llvmlite import binding  # lazy: only auto-discovery of a system clang needs it
    return binding.llvm_version_info[0]


def find_compiler(lang: str) -> Compiler:
    hit = _env_command(COMPILER_VARS[lang])
    if hit:                                   # the user's choice, taken as is
        return Compiler(tuple(shlex.split(hit[0])), origin=hit[1])
    if lang == "fortran":
        return _find_flang()
    hit = _env_command(WRAPPER_COMPILER_VARS[lang])
    if hit and _clang_major(shlex.split(hit[0])) is not None:
        return Compiler(tuple(shlex.split(hit[0])), origin=hit[1])
    clang = shutil.which(CLANG_NAMES[lang])
    # Only the exact LLVM major is taken unasked: newer bitcode does not parse in llvmlite's LLVM, and
    # older would but is untested here.  SCALGRAPH_CC takes any clang.
    if clang and _clang_major([clang]) == _llvmlite_major():
        return Compiler((clang,), origin="PATH")
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
    words = None
    for option in ("-show", "--showme"):
        try:
            r = subprocess.run(shlex.split(wrapper) + [option], capture_output=True, text=True, timeout=60)
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


def find_toolchain(lang: str) -> Toolchain:
    compiler = find_compiler(lang)
    wrapper = find_mpi_wrapper(lang)
    flags = mpi_flags(wrapper)
    shim_mpicc = shim_mpicc_for(lang, wrapper)
    if shim_mpicc != wrapper:
        flags = with_library_dirs_of(flags, mpi_flags(shim_mpicc))
    tc = Toolchain(lang, compiler, flags, shim_mpicc)
    if lang == "fortran":
        from scalgraph.static.fortran_mpi import mpi_module
        moddir, modobj = mpi_module(compiler, flags)
        tc = Toolchain(lang, compiler, flags, tc.shim_mpicc, ("-I", moddir), (modobj,))
    return tc
