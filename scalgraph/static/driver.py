"""sgcc / sgcxx / sgfort: drop-in replacements for mpicc / mpicxx / mpifort that build the program's
Program Structure Graph and link the runtime shim.

    source --clang/flang -c -emit-llvm -g--> bitcode --instrument_bitcode--> object (+ PSG part)
    objects, archives --read parts, link_psg--> PSG + tables C source --cc--> tables object
    objects + tables object + shim + MPI libraries --clang/flang--> executable (+ <exe>.psg.json)

Compiler messages go straight to the user's terminal and their exit status is ours, so a source that
does not compile looks exactly as it does with mpicc.  Calls that build nothing we can instrument
(-E, -M, -S, --version, ...) are handed to the underlying compiler unchanged.
SCALGRAPH_NO_INSTRUMENT=1 compiles and links plainly (same compilers and MPI, no PSG, no shim).
"""
from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from scalgraph.errors import UserError, run_reporting
from scalgraph.io.safe_write import (current_umask, output_destination, temporary_beside, write_atomic, write_output,
                                    write_through)
from scalgraph.static.args import (TAKES_VALUE, Invocation, Source, expand_response_files, map_opt_levels,
                                   parse_args)
from scalgraph.static.guards import check_outputs, wrapper_guard
from scalgraph.static.toolchain import Compiler, Toolchain, backend_for, find_compiler, find_toolchain

PROGRAM_NAMES = {"c": "sgcc", "c++": "sgcxx", "fortran": "sgfort"}
INFO_FLAGS = ("--version", "-dumpversion", "-dumpmachine", "--help", "-help", "-print-", "--print-")
INSTRUMENT_DIR = Path(__file__).resolve().parent.parent.parent / "instrument"


def sgcc() -> None:
    sys.exit(main("c", sys.argv[1:]))


def sgcxx() -> None:
    sys.exit(main("c++", sys.argv[1:]))


def sgfort() -> None:
    sys.exit(main("fortran", sys.argv[1:]))


def main(lang: str, argv: list[str]) -> int:
    """Run one wrapper call; never shows a traceback (SCALGRAPH_DEBUG=1 does, for bug reports)."""
    prog = PROGRAM_NAMES[lang]

    def work() -> int:
        with wrapper_guard(prog):        # MPICC=sgcc and the like must not start us again
            return build(lang, argv)
    return run_reporting(prog, work, "rerun with SCALGRAPH_DEBUG=1 and report it; SCALGRAPH_NO_INSTRUMENT=1 "
                         "builds without scalgraph meanwhile")


def build(lang: str, argv: list[str]) -> int:
    argv = map_opt_levels(expand_response_files(argv))
    inv = parse_args(argv)
    if inv.mode in ("link", "compile"):
        for out in output_names(inv):
            check_outputs(out, [s.path for s in inv.sources] + inv.link_inputs, PROGRAM_NAMES[lang],
                          given=inv.output is not None)
    tc = find_toolchain(lang, linking=inv.mode != "compile")
    if inv.mode == "show":
        print(shlex.join(show_command(tc, argv)))
        return 0
    if inv.mode == "passthrough":
        return run(passthrough_command(tc, argv))
    if inv.mode == "compile" and inv.output and len(inv.sources) > 1:
        raise UserError("cannot specify -o with -c and several sources: compile them one by one")
    instrument = os.environ.get("SCALGRAPH_NO_INSTRUMENT", "") not in ("1", "yes", "true")
    max_depth = max_loop_depth()
    with tempfile.TemporaryDirectory(prefix="scalgraph-") as tmp:
        objects: list[str] = []
        parts: dict[str, dict] = {}          # object -> its PSG part, for the objects made here
        # a call that also links makes its instrumented objects with the tables, in one clang
        held: list[HeldBack] | None = [] if inv.mode == "link" else None
        for i, src in enumerate(inv.sources):
            if inv.mode == "compile":
                out = inv.output or object_name(src.path)
            else:
                out = os.path.join(tmp, f"{i}-{Path(src.path).stem}.o")
            rc = compile_source(tc, inv, src, out, tmp, instrument, max_depth, parts, held)
            if rc:
                return rc
            objects.append(out)
        if inv.mode == "compile":
            return 0
        return link(tc, inv, objects, tmp, instrument, max_depth, parts, held)


def output_names(inv: Invocation) -> list[str]:
    """What this call writes: -o, else a.out for a link, else each source's .o in the current directory."""
    if inv.output:
        return [inv.output]
    if inv.mode == "compile":
        return [object_name(src.path) for src in inv.sources]
    return ["a.out"]


def object_name(source: str) -> str:
    return Path(source).with_suffix(".o").name


def max_loop_depth() -> int:
    raw = os.environ.get("SCALGRAPH_MAX_LOOP_DEPTH", "10")
    try:
        depth = int(raw)
    except ValueError:
        depth = -1
    if depth < 0:
        raise UserError(f"SCALGRAPH_MAX_LOOP_DEPTH={raw!r} is not a loop depth: give a whole number >= 0")
    return depth


def run(cmd: list[str]) -> int:
    """Run with the user's terminal; a signal death becomes 128+signal like a shell reports it."""
    if os.environ.get("SCALGRAPH_VERBOSE") == "1":
        print("+ " + shlex.join(cmd), file=sys.stderr)
    try:
        rc = subprocess.run(cmd).returncode
    except OSError as e:
        raise UserError(f"cannot run {cmd[0]}: {e.strerror}; check SCALGRAPH_CC/SCALGRAPH_CXX/SCALGRAPH_FC "
                        "and MPICC/MPICXX/MPIFC") from None
    return 128 - rc if rc < 0 else rc


def show_command(tc: Toolchain, argv: list[str]) -> list[str]:
    """What mpicc -show prints: the one compile-and-link command of a plain build."""
    from scalgraph.static.args import SHOW_FLAGS
    user = [a for a in argv if a not in SHOW_FLAGS]
    return [*tc.compiler.command, *tc.compiler.flags, *tc.extra_compile, *user, *tc.mpi.compile,
            *tc.extra_link, *tc.mpi.link]


def passthrough_command(tc: Toolchain, argv: list[str]) -> list[str]:
    if argv and all(a.startswith(INFO_FLAGS) for a in argv):
        return [*tc.compiler.command, *argv]
    if argv and argv[-1] in TAKES_VALUE:      # dangling "-o": nothing may follow it
        return [*tc.compiler.command, *tc.compiler.flags, *tc.extra_compile, *tc.mpi.compile, *argv]
    links = "-shared" in argv or not any(a in ("-E", "-M", "-MM", "-S", "-fsyntax-only") for a in argv)
    return [*tc.compiler.command, *tc.compiler.flags, *tc.extra_compile, *argv, *tc.mpi.compile,
            *((*tc.extra_link, *tc.mpi.link) if links else ())]


def compiler_for(tc: Toolchain, src: Source) -> Compiler:
    if src.lang == tc.lang or (src.lang == "asm" and tc.lang != "fortran"):
        return tc.compiler
    return find_compiler("c" if src.lang == "asm" else src.lang)


class HeldBack(NamedTuple):
    """An instrumented module whose code generation waits for the link step's tables."""
    backend: tuple[str, ...]
    text: str                    # the instrumented IR text
    out: str                     # where its object goes
    source: str


def compile_source(tc: Toolchain, inv: Invocation, src: Source, out: str, tmp: str, instrument: bool,
                   max_depth: int, parts: dict[str, dict] | None = None,
                   held: list[HeldBack] | None = None) -> int:
    comp = compiler_for(tc, src)
    lang_flags = ["-x", src.explicit_lang] if src.explicit_lang else []
    user = [*tc.extra_compile, *inv.compile_flags, *tc.mpi.compile]
    if not instrument or src.lang == "asm":
        return run([*comp.command, *comp.flags, "-c", *user, *lang_flags, src.path, "-o", out])
    user, deps = split_dependency_flags(user)
    backend = backend_for(comp) if src.lang != "fortran" else None
    # the front end is a clang of llvmlite's LLVM, which also makes the object: IR text in and out
    as_text = backend is not None and backend == comp.command and not comp.flags
    ir_file = os.path.join(tmp, Path(out).stem + (".ll" if as_text else ".bc"))
    debug = [] if inv.has_debug else added_debug_flags(src.lang, inv.compile_flags)
    rc = run([*comp.command, *comp.flags, "-S" if as_text else "-c", "-emit-llvm", *user, *debug, *lang_flags,
              src.path, "-o", ir_file])
    if rc == 0 and deps:
        rc = run(dependency_command(comp, [*user, *lang_flags], deps, src.path, out))
    if rc:
        return rc
    try:
        if as_text:
            from scalgraph.static import instrument_ir_text
            text, part = instrument_ir_text(Path(ir_file).read_bytes().decode("utf-8", "surrogateescape"),
                                            src.path, max_loop_depth=max_depth, keep_debug_info=True)
        else:
            from scalgraph.static import instrument_bitcode
            obj, part = instrument_bitcode(Path(ir_file).read_bytes(), src.path, opt_level=inv.opt_level,
                                           max_loop_depth=max_depth, as_bitcode=backend is not None,
                                           keep_debug_info=inv.has_debug)
    except UserError:
        raise
    except Exception as e:  # our bug must not break the user's build: this file goes without probes
        if os.environ.get("SCALGRAPH_DEBUG") == "1":
            raise
        print(f"{PROGRAM_NAMES[tc.lang]}: warning: {src.path}: the static pass failed ({type(e).__name__}: "
              f"{e}); compiled without probes, its code is charged to its callers (please report it)",
              file=sys.stderr)
        return run([*comp.command, *comp.flags, "-c", *user, *lang_flags, src.path, "-o", out])
    if parts is not None:
        parts[out] = part
    if as_text and held is not None:
        held.append(HeldBack(backend, text, out, src.path))
        return 0
    if as_text:
        obj = object_from_ir_text(backend, text, inv, tmp, src.path)
    elif backend is not None:
        obj = code_generation(backend, obj, inv, tmp, src.path)
    write_output(out, obj)       # a device such as /dev/null (configure probes) is written through
    return 0


def added_debug_flags(lang: str, flags: list[str]) -> list[str]:
    """The debug info the PSG needs (source lines, function names) when the user asked for none.
    C: line tables only, which name functions and lines as -g does at a third of -g's cost in the
    front end; but C++ line tables name a method without its class, and OpenMP's outlined regions
    lose the lexical scopes that tie their code to the function they came from: -g for those."""
    if lang == "c" and not any(f.startswith("-fopenmp") for f in flags):
        return ["-gline-tables-only"]
    return ["-g"]


# user flags that change the machine code but live on no IR function (the code generator's own)
CODEGEN_PREFIXES = ("-ffunction-sections", "-fdata-sections", "-fno-function-sections", "-fno-data-sections",
                    "-mcmodel=", "-fno-plt", "-fno-asynchronous-unwind-tables", "-fasynchronous-unwind-tables")


def object_from_ir_text(backend: tuple[str, ...], text: str, inv: Invocation, tmp: str, source: str) -> bytes:
    """The object of the instrumented IR text; without -g, from the text without its debug info
    (static/nodebug.py: the code generator then reads no locations, 1.2x faster on large files,
    the same machine code), falling back to the text with its debug info marked NoDebug if the
    stripped text does not compile (a debug node referenced where nodebug.py does not look)."""
    if inv.has_debug:
        return code_generation(backend, text.encode("utf-8", "surrogateescape"), inv, tmp, source, ".ll")
    from scalgraph.static.nodebug import marked_no_debug
    try:
        return code_generation(backend, code_generation_text(text, inv), inv, tmp, source, ".ll")
    except Exception:           # clang refused it, or our bug: the slower form still builds the object
        if os.environ.get("SCALGRAPH_DEBUG") == "1":
            raise
    return code_generation(backend, marked_no_debug(text).encode("utf-8", "surrogateescape"), inv, tmp, source,
                           ".ll")


def code_generation_text(text: str, inv: Invocation) -> bytes:
    """What the code generator reads first: the text as it is with -g, else without debug info."""
    if not inv.has_debug:
        from scalgraph.static.nodebug import without_debug_info
        text = without_debug_info(text)
    return text.encode("utf-8", "surrogateescape")


def code_generation_command(backend: tuple[str, ...], inv: Invocation) -> list[str]:
    """The code generator's flags: code generation only (-disable-llvm-optzns: the middle end ran in
    the first compile), position independent like llvmlite's, at the user's -O level."""
    flags = [f for f in inv.compile_flags if f.startswith(CODEGEN_PREFIXES)]
    return [*backend, "-c", f"-O{max(0, min(3, inv.opt_level))}", "-fPIC", "-Xclang", "-disable-llvm-optzns",
            *flags, "-Wno-unused-command-line-argument"]


def code_generation(backend: tuple[str, ...], bitcode: bytes, inv: Invocation, tmp: str, source: str,
                    suffix: str = ".bc") -> bytes:
    """Machine code for the instrumented module (bitcode, or IR text with suffix ".ll") by a clang of
    llvmlite's LLVM: code generation only (-disable-llvm-optzns: the middle end ran in the first
    compile), position independent like llvmlite's, at the user's -O level."""
    fd, bc = tempfile.mkstemp(dir=tmp, suffix=".sg" + suffix)
    os.close(fd)
    obj = bc[:-len(suffix)] + ".o"
    Path(bc).write_bytes(bitcode)
    r = subprocess.run([*code_generation_command(backend, inv), bc, "-o", obj], capture_output=True, text=True)
    if r.returncode:
        lines = r.stderr.strip().splitlines()
        raise UserError(f"{source}: code generation by {backend[0]} "
                        f"failed ({(lines or ['no message'])[0][:200]}); set SCALGRAPH_CC to another clang")
    return Path(obj).read_bytes()


def split_dependency_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """(flags without -MD/-MMD/-MF/-MT/-MQ/-MP, those flags).  They get a step of their own: zig's
    clang writes no bitcode when they come with -emit-llvm, and they would name our temporary file."""
    rest: list[str] = []
    deps: list[str] = []
    it = iter(flags)
    for f in it:
        if f in ("-MF", "-MT", "-MQ"):
            deps += [f, next(it, "")]
        elif f in ("-MD", "-MMD", "-MP") or f.startswith(("-MF", "-MT", "-MQ")):
            deps.append(f)
        else:
            rest.append(f)
    return rest, deps


def dependency_command(comp: Compiler, flags: list[str], deps: list[str], src: str, out: str) -> list[str]:
    """The -MD/-MMD side output as a preprocessor run (-M/-MM), with the names a plain compile uses."""
    mode = "-MM" if "-MMD" in deps else "-M"
    extra = [] if any(f.startswith(("-MT", "-MQ")) for f in deps) else ["-MT", out]
    if not any(f.startswith("-MF") for f in deps):
        extra += ["-MF", str(Path(out).with_suffix(".d"))]
    kept = [f for f in deps if f not in ("-MD", "-MMD")]
    return [*comp.command, *comp.flags, *flags, mode, *kept, *extra, src]


def static_archives(inv: Invocation) -> list[str]:
    """The lib<name>.a that each -l resolves to (the linker's rule: first -L directory that has the
    library; a shared library there wins), so sgcc-built static libraries contribute their parts."""
    found = []
    for name in inv.libs:
        if name.startswith(":"):
            candidates = [name[1:]]
        else:
            candidates = [f"lib{name}.so", f"lib{name}.a"]
        for d in inv.lib_dirs:
            hit = next((os.path.join(d, c) for c in candidates if os.path.isfile(os.path.join(d, c))), None)
            if hit:
                if hit.endswith(".a"):
                    found.append(hit)
                break
    return found


def link(tc: Toolchain, inv: Invocation, objects: list[str], tmp: str, instrument: bool,
         max_depth: int, made: dict[str, dict] | None = None, held: list[HeldBack] | None = None) -> int:
    exe = inv.output or "a.out"
    items = [objects[x] if isinstance(x, int) else x for x in inv.link_items]
    extra: list[str] = []
    psg = None
    psg_text = ""
    tables = None
    given = [p for p in inv.link_inputs if os.path.isfile(p)] + static_archives(inv)
    if instrument or given:
        from scalgraph.static import link_psg_json, read_parts_from_files
        # objects instrumented earlier need the tables and the shim even in a plain link; the
        # parts of the objects made in this call are at hand (no ELF reading for them)
        made = made or {}
        parts = []
        for path in (objects if instrument else []) + given:
            parts += [made[path]] if path in made else read_parts_from_files([path])
        if parts:
            if instrument:
                program_warnings(parts, exe, PROGRAM_NAMES[tc.lang])
            # with modules held back, the tables join the first as IR (objects_and_tables)
            psg, tables, psg_text = link_psg_json(parts, max_loop_depth=max_depth,
                                                  tables_as="ir" if held else "c")
            extra = shim_link_flags(tc)
        elif instrument:
            print(f"{PROGRAM_NAMES[tc.lang]}: warning: no object carries a scalgraph PSG part (none was "
                  f"built with sgcc/sgcxx/sgfort): {exe} is linked without instrumentation", file=sys.stderr)
    tables_object = objects_and_tables(held or [], tables, inv, tmp,
                                       lambda: link_psg_json(parts, max_loop_depth=max_depth)[1])
    if tables_object:
        extra = [tables_object, *extra]
    # a device (-o /dev/null: configure and CMake probes) or /dev/stdout is written through, never
    # renamed over (safe_write.output_destination)
    dest, through = output_destination(exe)
    fd, tmp_exe = temporary_beside(os.path.join(tmp, "a.out") if through else dest)
    os.close(fd)
    try:
        rc = run([*tc.compiler.command, *tc.compiler.flags, *items, *tc.extra_link, *extra, *tc.mpi.link,
                  "-o", tmp_exe])
        if rc:
            return rc
        # the modes cc leaves (the linker kept mkstemp's 0600 and added x for an executable)
        runnable = os.stat(tmp_exe).st_mode & stat.S_IXUSR
        os.chmod(tmp_exe, (0o777 if runnable else 0o666) & ~current_umask())
        if through:
            write_through(dest, Path(tmp_exe).read_bytes())
            return 0
        try:
            os.replace(tmp_exe, dest)
        except OSError as e:
            raise UserError(f"cannot write {exe}: {e.strerror}") from None
        if psg is not None:      # after the executable: its own section is what counts (.psg.json is a copy)
            write_atomic(dest + ".psg.json", psg_text)
    finally:
        if os.path.lexists(tmp_exe):
            os.unlink(tmp_exe)
    return 0


def program_warnings(parts: list[dict], exe: str, prog: str) -> None:
    """Once per link, about the whole program: a file without main or without MPI is normal (a
    library part, a helper reaching MPI through another file), a program without either is not."""
    if not any(p.get("has_main") for p in parts):
        print(f"{prog}: warning: {exe}: no main program among the files built with sgcc/sgcxx/sgfort; "
              "its PSG has no root (build the file with main with scalgraph too)", file=sys.stderr)
    elif not any(p.get("has_mpi") for p in parts):
        print(f"{prog}: warning: {exe}: the program makes no MPI call in the files built with "
              "sgcc/sgcxx/sgfort; scalgraph will have no communication to analyse", file=sys.stderr)
    bare = [p.get("source", "?") for p in parts if not p.get("has_debug_info")]
    if bare:
        print(f"{prog}: warning: no debug info in {', '.join(bare[:3])}{' ...' if len(bare) > 3 else ''}: "
              "the PSG has no source lines there (compile them with -g)", file=sys.stderr)


def objects_and_tables(held: list[HeldBack], tables: str | None, inv: Invocation, tmp: str,
                       c_tables) -> str | None:
    """Make the objects of the modules held back by a call that compiles and links.  The tables
    (LLVM IR from link_psg_json(tables_as="ir")) join the first module, whose code generator makes
    them with its code: no C compile of their own, whose clang start (loading 150 MB of shared LLVM
    libraries) cost about 30 ms of every such build.  Anything clang refuses takes the separate path
    (the module alone with its own fallbacks, the tables as C from c_tables()).  The path of a
    separate tables object, or None."""
    if not held:
        return compile_tables(tables, tmp) if tables is not None else None
    for h in held[1:]:
        write_output(h.out, object_from_ir_text(h.backend, h.text, inv, tmp, h.source))
    first = held[0]
    if tables is not None:
        try:
            text = code_generation_text(first.text, inv) + with_slots_of(first.text, tables).encode()
            write_output(first.out, code_generation(first.backend, text, inv, tmp, first.source, ".ll"))
            return None
        except Exception:          # clang refused it, or our bug: the usual two objects instead
            if os.environ.get("SCALGRAPH_DEBUG") == "1":
                raise
    write_output(first.out, object_from_ir_text(first.backend, first.text, inv, tmp, first.source))
    return compile_tables(c_tables(), tmp) if tables is not None else None


def with_slots_of(module: str, tables: str) -> str:
    """The IR tables without the declarations of the fid slots `module` defines (the probes append
    their definitions after @sg_cur's declaration, at the module's end)."""
    from scalgraph.static.link import TABLES_IR_SLOT
    at = module.rfind("\n@sg_cur = external thread_local")
    defined = {line.split(" = ", 1)[0] for line in module[at:].split("\n")
               if line.startswith("@__sg_fid_")} if at >= 0 else set()
    suffix = TABLES_IR_SLOT.format("")[1:]
    return "\n" + "\n".join(line for line in tables.split("\n")
                             if not (line.endswith(suffix) and line.split(" = ", 1)[0] in defined))


def compile_tables(source: str, tmp: str) -> str:
    """The generated tables are plain C: compile them with the C compiler we found."""
    cc = find_compiler("c")
    path = os.path.join(tmp, "sg_psg_tables.c")
    Path(path).write_text(source)
    obj = path[:-2] + ".o"
    rc = subprocess.run([*cc.command, *cc.flags, "-c", "-O0", "-fPIC", "-I", str(INSTRUMENT_DIR), path,
                         "-o", obj], capture_output=True, text=True)
    if rc.returncode:
        raise UserError(f"compiling the generated PSG tables failed ({rc.stderr.strip()[:300]}); "
                        "set SCALGRAPH_DEBUG=1 and report it")
    return obj


def shim_link_flags(tc: Toolchain) -> list[str]:
    """The shim library for this MPI, on the link line before libmpi (or its wrappers never run)."""
    try:
        from scalgraph.runtime.shim import shim_library
    except ImportError:
        raise UserError("the scalgraph runtime shim is not part of this installation: reinstall scalgraph, "
                        "or build with SCALGRAPH_NO_INSTRUMENT=1") from None
    use_our_clang_in_mpi_wrapper()
    # static: the program then runs wherever the plain one runs (no path into ~/.cache in it)
    from scalgraph.runtime.shim import shim_link_args
    return shim_link_args(tc.shim_mpicc)


def use_our_clang_in_mpi_wrapper() -> None:
    """The shim is built by the MPI's own mpicc, which runs `cc`; a machine with only PyPI's MPICH and
    zig has none, so point the wrapper's compiler variables (MPICH_CC, OMPI_CC) at the clang we use."""
    if shutil.which("cc") or os.environ.get("MPICH_CC") or os.environ.get("OMPI_CC"):
        return
    cc = find_compiler("c")
    os.environ["MPICH_CC"] = os.environ["OMPI_CC"] = " ".join([*cc.command, *cc.flags])
