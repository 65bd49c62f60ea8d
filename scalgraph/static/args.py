"""The command line of an mpicc-style compiler call, split the way the driver needs it.

The driver compiles each source itself (to bitcode, then through the static pass) and links itself,
so it needs to know which arguments are sources, which are objects/libraries to link (in order: the
linker resolves static libraries left to right), which flags only matter when compiling and which
only when linking.  Anything we do not recognise is given to both steps, the way gcc/clang would
see it.  Calls we do not instrument (-E, -M, -S, --version, no input ...) are passed through whole.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from scalgraph.errors import UserError
from scalgraph.io.safe_read import read_regular

LANGS_BY_SUFFIX = {
    ".c": "c", ".i": "c",
    ".cc": "c++", ".cp": "c++", ".cpp": "c++", ".cxx": "c++", ".c++": "c++", ".C": "c++", ".CPP": "c++",
    ".ii": "c++",
    ".f": "fortran", ".for": "fortran", ".ftn": "fortran", ".f90": "fortran", ".f95": "fortran",
    ".f03": "fortran", ".f08": "fortran", ".F": "fortran", ".FOR": "fortran", ".F90": "fortran",
    ".F95": "fortran", ".F03": "fortran", ".F08": "fortran",
    ".s": "asm", ".S": "asm", ".sx": "asm",
}
# -x names understood by clang/flang -> our language names
X_LANGS = {"c": "c", "c++": "c++", "f95": "fortran", "f95-cpp-input": "fortran", "f77": "fortran",
           "f77-cpp-input": "fortran", "fortran": "fortran", "assembler": "asm",
           "assembler-with-cpp": "asm", "cpp-output": "c", "c++-cpp-output": "c++"}

# Options whose value is the next argument.
TAKES_VALUE = {"-o", "-I", "-D", "-U", "-L", "-l", "-x", "-include", "-imacros", "-isystem", "-iquote",
               "-idirafter", "-iprefix", "-isysroot", "-MF", "-MT", "-MQ", "-Xlinker", "-Xclang",
               "-Xpreprocessor", "-Xassembler", "-u", "-T", "-z", "-J", "-module-dir", "-target",
               "-arch", "-e", "--param"}
# Only meaningful when compiling (dropped from the link command).
COMPILE_ONLY_PAIRS = {"-I", "-D", "-U", "-include", "-imacros", "-isystem", "-iquote", "-idirafter",
                      "-iprefix", "-MF", "-MT", "-MQ", "-Xclang", "-Xpreprocessor", "-J", "-module-dir"}
COMPILE_ONLY_PREFIXES = ("-I", "-D", "-U", "-std=", "-MF", "-MT", "-MQ", "-J", "-W")
COMPILE_ONLY_FLAGS = {"-MD", "-MMD", "-MP", "-ansi", "-pedantic", "-pedantic-errors", "-w", "-C", "-P",
                      "-trigraphs", "-cpp", "-nocpp", "-ffree-form", "-ffixed-form"}
# Only meaningful when linking (dropped from the compile command).
LINK_ONLY_PAIRS = {"-L", "-l", "-Xlinker", "-u", "-T", "-z", "-e"}
LINK_ONLY_PREFIXES = ("-L", "-l", "-Wl,")
LINK_ONLY_FLAGS = {"-static", "-shared", "-rdynamic", "-pie", "-no-pie", "-s", "-nostdlib",
                   "-nodefaultlibs", "-nostartfiles", "-static-libgcc", "-shared-libgcc",
                   "-static-libstdc++", "-static-pie"}
# A call with one of these is not a build: hand it to the underlying compiler unchanged.
PASSTHROUGH_FLAGS = {"-E", "-M", "-MM", "-S", "-fsyntax-only", "--version", "-dumpversion",
                     "-dumpmachine", "-dumpspecs", "--help", "-help", "-###", "-emit-llvm", "-shared"}
PASSTHROUGH_PREFIXES = ("-print-", "--print-", "--help=")
# mpicc's own "what would you run" options.
SHOW_FLAGS = {"-show", "-showme", "--showme", "-compile_info", "-compile-info", "-link_info", "-link-info"}


@dataclass
class Source:
    path: str
    lang: str              # "c", "c++", "fortran" or "asm"
    explicit_lang: str = ""  # the -x value in force, to repeat it on the compile command


@dataclass
class Invocation:
    mode: str                       # "link", "compile" (-c), "passthrough", "show"
    argv: list[str]                 # the user's arguments, untouched
    sources: list[Source] = field(default_factory=list)
    output: str | None = None
    compile_flags: list[str] = field(default_factory=list)
    # link flags and inputs in the user's order; an int is the index of a source (its object goes there)
    link_items: list[str | int] = field(default_factory=list)
    link_inputs: list[str] = field(default_factory=list)   # objects and archives named by path
    libs: list[str] = field(default_factory=list)          # -l names
    lib_dirs: list[str] = field(default_factory=list)      # -L directories
    opt_level: int = 0              # 0..3 as llvmlite's codegen understands it
    has_debug: bool = False         # the user asked for -g (anything but -g0)


def opt_level_of(flag: str) -> int | None:
    """-O flag -> llvmlite opt level, None if the argument is not an -O flag."""
    if not flag.startswith("-O"):
        return None
    level = flag[2:]
    return {"": 1, "0": 0, "1": 1, "g": 1, "2": 2, "s": 2, "z": 2, "3": 3, "fast": 3}.get(
        level, 3 if level.isdigit() else 2)


def map_opt_levels(argv: list[str]) -> list[str]:
    """gcc takes -O4, -O5 ... as -O3 and -Ofast silently; clang warns about each on every file.  Give
    clang the level it would use anyway (-Ofast: what clang advises for gcc's meaning), so a build
    prints no more than with the user's own compiler."""
    out: list[str] = []
    value_next = False
    for a in argv:
        if value_next:
            value_next = False
            out.append(a)
        elif a in TAKES_VALUE:
            value_next = True
            out.append(a)
        elif a == "-Ofast":
            out += ["-O3", "-ffast-math"]
        elif a.startswith("-O") and a[2:].isdigit() and int(a[2:]) > 3:
            out.append("-O3")
        else:
            out.append(a)
    return out


def language_of(path: str) -> str | None:
    """The language a file name says, None for objects/libraries (things only the linker reads)."""
    return LANGS_BY_SUFFIX.get(os.path.splitext(path)[1])


MAX_RESPONSE_DEPTH = 10           # gcc's @file may name further @files; deeper than this is a loop
MAX_RESPONSE_BYTES = 64 << 20     # the longest link lines of real projects are a few MB


def expand_response_files(argv: list[str], depth: int = 0) -> list[str]:
    """gcc's @file: the file's words take its place (build systems use it for long link lines); an
    @name that does not exist stays as it is, as gcc leaves it.  One that exists must be a regular
    file: a FIFO would block the build, a device never end."""
    out: list[str] = []
    for a in argv:
        if a.startswith("@") and len(a) > 1 and os.path.lexists(a[1:]):
            out += _response_file_words(a[1:], depth)
        else:
            out.append(a)
    return out


def _response_file_words(path: str, depth: int) -> list[str]:
    if depth >= MAX_RESPONSE_DEPTH:
        raise UserError(f"response file @{path} is nested more than {MAX_RESPONSE_DEPTH} deep (does it name "
                        "itself?); give the arguments without the loop")
    text = read_regular(path, "response file", MAX_RESPONSE_BYTES).decode("utf-8", "surrogateescape")
    try:
        words = shlex.split(text)
    except ValueError as e:          # shlex: "No closing quotation", "No escaped character"
        raise UserError(f"response file @{path} cannot be split into arguments ({str(e).lower()}); "
                        "check its quotes and backslashes") from None
    return expand_response_files(words, depth + 1)


def parse_args(argv: list[str]) -> Invocation:
    inv = Invocation(mode="link", argv=list(argv))
    x_lang = ""                   # -x in force ("" = by suffix)
    passthrough = show = compile_only = False
    i = 0
    while i < len(argv):
        a = argv[i]
        value = None
        if a in TAKES_VALUE:
            if i + 1 == len(argv):      # "-o" with nothing after: the compiler says so in its words
                passthrough = True
            else:
                value = argv[i + 1]
                i += 1
        i += 1
        if a in SHOW_FLAGS:
            show = True
        elif a in PASSTHROUGH_FLAGS or a.startswith(PASSTHROUGH_PREFIXES) or a == "-":
            passthrough = True
        elif a == "-v" and len(argv) == 1:
            passthrough = True
        elif a == "-c":
            compile_only = True
        elif a == "-o":
            inv.output = value
        elif a == "-x":
            x_lang = "" if value == "none" else (value or "")
        elif a.startswith("-x") and len(a) > 2:
            x_lang = "" if a[2:] == "none" else a[2:]
        elif a in LINK_ONLY_PAIRS:
            inv.link_items += [a] + ([value] if value is not None else [])
            if a == "-l" and value:
                inv.libs.append(value)
            elif a == "-L" and value:
                inv.lib_dirs.append(value)
        elif a in COMPILE_ONLY_PAIRS or a in TAKES_VALUE:
            inv.compile_flags += [a] + ([value] if value is not None else [])
            if a not in COMPILE_ONLY_PAIRS:
                inv.link_items += [a] + ([value] if value is not None else [])
        elif a.startswith("-"):
            _classify_flag(inv, a)
        else:
            lang = X_LANGS.get(x_lang, "") if x_lang else language_of(a)
            if lang:
                inv.sources.append(Source(a, lang, x_lang))
                inv.link_items.append(len(inv.sources) - 1)
            else:
                inv.link_items.append(a)
                inv.link_inputs.append(a)
    if show:
        inv.mode = "show"
    elif passthrough or not (inv.sources or inv.link_inputs):
        inv.mode = "passthrough"
    elif compile_only:
        inv.mode = "compile"
    return inv


def _classify_flag(inv: Invocation, a: str) -> None:
    level = opt_level_of(a)
    if level is not None:
        inv.opt_level = level
    if a.startswith("-g"):
        inv.has_debug = a != "-g0"
    if a in LINK_ONLY_FLAGS or a.startswith(LINK_ONLY_PREFIXES):
        inv.link_items.append(a)
        if a.startswith("-l") and len(a) > 2:
            inv.libs.append(a[2:])
        elif a.startswith("-L") and len(a) > 2:
            inv.lib_dirs.append(a[2:])
    elif (a in COMPILE_ONLY_FLAGS or a.startswith(COMPILE_ONLY_PREFIXES)) and not a.startswith("-Wl,"):
        inv.compile_flags.append(a)
    else:                          # -O, -g, -f..., -m..., -pthread, -fopenmp: both steps
        inv.compile_flags.append(a)
        inv.link_items.append(a)
