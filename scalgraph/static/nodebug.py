"""The instrumented module's IR text without its debug info, for code generation when the user did
not ask for -g (the front end added line tables or -g only for the PSG's source lines).

A plain `-O2` build has no debug info at all; keeping the locations (even with the compile unit
marked NoDebug) made the code generator read and carry a DILocation per instruction: 1.2x the CPU of
the same module without them (generated 20,000-line program, clang-22).  Removed here, as text:
  - `!dbg` / `!DIAssignID` attachments at the end of instruction, global and `define` lines, and
    a declaration's `!dbg`,
  - `#dbg_` records,
  - the debug metadata nodes (`!N = [distinct ]!DI...`) and `!llvm.dbg.cu`,
  - references to those nodes from the other tuples (a loop's `!llvm.loop` names its start and end
    DILocations; what is left is what a compile without -g writes).
A node this does not know how to clean (a tuple with strings that refers to debug nodes) is kept
as is; if the result still refers to a removed node, the code generator refuses it and the caller
falls back to the text with debug info (driver.code_generation_without_debug_info).
"""
from __future__ import annotations

import re

# an attachment at the end of the line: only attachments may follow it (a string constant or an
# inline asm string containing ", !dbg !1" is never at the end of a line: a quote follows it)
_INSTR_ATTACHMENT = re.compile(r', !(?:dbg|DIAssignID) !\d+(?=(?:, ![\w.]+ !\d+)*$)', re.M)
_DEFINE_TAIL = re.compile(r'(?: ![\w.]+ !\d+)* \{')
_DECLARE_ATTACHMENT = re.compile(r'^declare !dbg !\d+ ')
_NODE = re.compile(r'^!(\d+) = (?:distinct )?!')
_REF = re.compile(r'!(\d+)\b')


def without_debug_info(text: str) -> str:
    """The module text with no debug info (see the module docstring)."""
    lines = text.split("\n")
    body: list[str] = []
    meta: list[str] = []
    debug_ids: set[str] = set()
    for line in lines:
        if line.startswith("!"):
            m = _NODE.match(line)
            if m and line.startswith("DI", m.end()):
                debug_ids.add(m.group(1))
            elif not line.startswith("!llvm.dbg.cu "):
                meta.append(line)
        elif line.startswith("    #dbg_"):
            continue
        elif line.startswith("define ") and "!dbg !" in line:
            body.append(_strip_define(line))
        elif line.startswith("declare !dbg !"):       # a declaration's DISubprogram (call sites)
            body.append(_DECLARE_ATTACHMENT.sub("declare ", line, count=1))
        else:
            body.append(line)
    if not debug_ids:
        return text
    out = _INSTR_ATTACHMENT.sub("", "\n".join(body))
    return out + "\n" + "\n".join(_without_refs(line, debug_ids) for line in meta)


def _strip_define(line: str) -> str:
    """`define ... #0 !dbg !13 {` -> `define ... #0 {` (the function's DISubprogram)."""
    head, sep, tail = line.rpartition(" !dbg !")
    digits = len(tail) - len(tail.lstrip("0123456789"))
    rest = tail[digits:]
    if not sep or not digits or not _DEFINE_TAIL.fullmatch(rest):
        return line
    return head + rest


def _without_refs(line: str, debug_ids: set[str]) -> str:
    """A metadata tuple without its operands that are removed debug nodes."""
    if "!{" not in line or not any(r in debug_ids for r in _REF.findall(line, line.find("=") + 1)):
        return line
    head, _, body = line.partition("!{")
    if '"' in body or not body.endswith("}"):
        return line          # strings could hold ", ": left to the fallback
    ops = [op for op in body[:-1].split(", ") if not (op.startswith("!") and op[1:] in debug_ids)]
    return head + "!{" + ", ".join(ops) + "}"


_EMISSION_KIND = re.compile(r"emissionKind: \w+")


def marked_no_debug_lines(lines: list[str]) -> list[str]:
    """No variable-location records, compile units marked NoDebug (no DWARF at all); the
    instructions keep their !dbg locations (the code generator still reads them: the slower form,
    for the llvmlite path and as the fallback of without_debug_info)."""
    out = []
    for line in lines:
        if line.startswith("    #dbg_"):
            continue
        if line.startswith("!") and "!DICompileUnit(" in line:
            line = _EMISSION_KIND.sub("emissionKind: NoDebug", line)
        out.append(line)
    return out


def marked_no_debug(text: str) -> str:
    """The fallback: the module's compile units marked NoDebug, its variable records dropped."""
    return "\n".join(marked_no_debug_lines(text.split("\n")))
