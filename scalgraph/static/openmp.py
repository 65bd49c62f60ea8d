"""OpenMP parallel regions in the PSG.

clang outlines the body of `#pragma omp parallel` (and `parallel for`) into a function of its own
(e.g. `main.omp_outlined`) that LLVM's OpenMP runtime runs on every thread of the team, started by
`__kmpc_fork_call(loc, nargs, @outlined, args...)`.  For the PSG that fork is a call of the outlined
function at the fork's place: the region, and a loop of `parallel for`, become vertices under the
fork's parent, context-sensitive like any call (the runtime shim gives worker threads the fork's
calling context, instrument/sg_ompt.c).  Pure text, like scalgraph/static/ir.py.
"""
from __future__ import annotations

import re

from scalgraph.static.ir import Instr, unquote

# runtime entry points whose third argument is the outlined function they run on a new team
FORK_CALLS = frozenset({"__kmpc_fork_call", "__kmpc_fork_call_if", "__kmpc_fork_teams"})
_GLOBAL = re.compile(r'@((?:[-\w.$]+|"[^"]*"))\s*$')
# outlined region names: clang's <fn>.omp_outlined[_debug__][.N] (older: .omp_outlined.), flang's <fn>..omp_par[.N]
_OUTLINED_NAME = re.compile(r'^(.*?)(?:\.omp_outlined|\.\.omp_par)')


def forked_function(ins: Instr) -> str | None:
    """The outlined function a fork call starts (unquoted name), None for any other instruction."""
    if not ins.is_call or ins.callee not in FORK_CALLS:
        return None
    args = _arguments(ins.text, ins.callee)
    if len(args) < 3:
        return None
    m = _GLOBAL.search(args[2].strip())
    return unquote(m.group(1)) if m else None


def source_function(name: str) -> str:
    """The source function a region body's code belongs to: `main` for clang's `main.omp_outlined_debug__`
    (the outlined body's debug name, into which the region's code is inlined), unchanged otherwise."""
    m = _OUTLINED_NAME.match(name or "")
    return m.group(1) if m and m.group(1) else name


def _arguments(text: str, callee: str) -> list[str]:
    """The top-level arguments of the call of `callee` in one instruction's text."""
    start = text.find(f"@{callee}(")
    if start < 0:
        start = text.find(f'@"{callee}"(')
    if start < 0:
        return []
    i = text.index("(", start) + 1
    args, depth, cur = [], 0, []
    for ch in text[i:]:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            if depth == 0:
                args.append("".join(cur))
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    return args
