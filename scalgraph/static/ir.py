"""Read one module's textual IR (the text of str(module), taken once) into plain data.

llvmlite has no API for debug metadata, successors or callees, and str(instruction) renumbers
metadata slots; so everything here comes from the one module text, whose `!dbg !N` references
match its own `!N = ...` definitions (see shared/notes/toolchain.md).  Pure text: no llvmlite.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

_IDENT = r'(?:[-\w.$]+|"[^"]*")'
_DEFINE = re.compile(r'^define\b(?P<head>.*?)@(?P<name>' + _IDENT + r')\((?P<rest>.*)$')
_LABEL = re.compile(r'^(?P<label>' + _IDENT + r'):(?:\s|$)')
_DBG = re.compile(r'!dbg !(\d+)')
_META_DEF = re.compile(r'^!(\d+) = (?:distinct )?(.*)$')
_TARGET = re.compile(r'label %(' + _IDENT + r')')
_DECLARED = re.compile(r'@(' + _IDENT + r')\(')
_ASSIGNED = re.compile(r'%' + _IDENT + r' = ')
_CALLEE = re.compile(r'([@%]' + _IDENT + r')\(')
_CALL_KW = re.compile(r'(?:^|=\s|\s)(?:(?:tail|musttail|notail)\s+)?(call|invoke|callbr)\s')
_FIELD = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|[^,()]+)')
_LOCATION = re.compile(r'^!DILocation\(line: (\d+)(?:, column: \d+)?, scope: !(\d+)(?:, inlinedAt: !(\d+))?')

TERMINATORS = {"ret", "br", "switch", "indirectbr", "invoke", "callbr", "resume", "unreachable",
               "cleanupret", "catchret", "catchswitch"}
# instructions that must stay at the top of a block (probes go after them)
LEADING = {"phi", "landingpad", "catchpad", "cleanuppad"}
# instructions that are not computation (not counted as work)
FREE = LEADING | {"alloca"}


def unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


@dataclass(slots=True)
class Instr:
    line_no: int          # index of the line in the module text
    text: str
    opcode: str
    dbg: int = -1         # metadata id of the DILocation, -1 if none
    callee: str | None = None     # direct callee (unquoted), None if not a call or indirect
    is_call: bool = False
    indirect: bool = False
    inline_asm: bool = False


@dataclass
class Block:
    label: str
    instrs: list[Instr] = field(default_factory=list)


@dataclass
class Function:
    name: str             # linkage name, unquoted
    linkage: str          # "internal", "private", "linkonce_odr", "" (external) ...
    dbg: int              # DISubprogram metadata id, -1 if none
    define_line: int      # line index of `define`
    end_line: int         # line index of the closing `}`
    blocks: list[Block] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.linkage in ("internal", "private")


@dataclass
class Module:
    lines: list[str]
    functions: list[Function]
    declared: set[str]                # functions declared (not defined) in the module
    metadata: dict[int, str]          # id -> definition text (after "!N = ", without "distinct")
    source_filename: str = ""

    def defined(self) -> dict[str, Function]:
        return {f.name: f for f in self.functions}


def parse_module_text(text: str) -> Module:
    lines = text.split("\n")
    functions: list[Function] = []
    declared: set[str] = set()
    metadata: dict[int, str] = {}
    source = ""
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("define "):
            fn, i = _parse_function(lines, i)
            functions.append(fn)
            continue
        if line.startswith("declare "):
            m = _DECLARED.search(line)
            if m:
                declared.add(unquote(m.group(1)))
        elif line.startswith("!"):
            m = _META_DEF.match(line)
            if m:
                metadata[int(m.group(1))] = m.group(2)
        elif line.startswith("source_filename"):
            source = line.split("=", 1)[1].strip().strip('"')
        i += 1
    return Module(lines, functions, declared, metadata, source)


def _parse_function(lines: list[str], start: int) -> tuple[Function, int]:
    head = lines[start]
    m = _DEFINE.match(head)
    if not m:
        raise ValueError(f"cannot read function definition: {head[:80]}")
    words = m.group("head").split()
    linkage = next((w for w in words if w in _LINKAGES), "")
    dbg_m = re.search(r'!dbg !(\d+)\s*\{?\s*$', head)
    fn = Function(unquote(m.group("name")), linkage, int(dbg_m.group(1)) if dbg_m else -1, start, start)
    block: Block | None = None
    i = start + 1
    n = len(lines)
    while i < n:
        line = lines[i]
        # the usual line, tested first: a one-line instruction that is no call, with a plain result name
        m = _PLAIN_INSTR(line)
        if m is not None and block is not None and m.group(1) not in _CALL_OPCODES and not (
                i + 1 < n and lines[i + 1].startswith(("   ", "  ]"))):
            d = m.group(2)
            block.instrs.append(Instr(i, line, m.group(1), int(d) if d else -1))
            i += 1
            continue
        # an instruction: two spaces, then not a space, ";" or "]"
        if line[:2] == "  " and line[2:3] not in (" ", "]", ";", ""):
            if block is None:                       # unnamed entry block
                block = Block("%entry")
                fn.blocks.append(block)
            # gather continuation lines (switch tables, invoke's "to label ... unwind label ...")
            j = i + 1
            nxt = lines[j] if j < n else ""
            if nxt.startswith(("   ", "  ]")) and not nxt.lstrip().startswith("#dbg_"):
                text = line
                while j < n and lines[j].startswith(("   ", "  ]")) and not lines[j].lstrip().startswith("#dbg_"):
                    text += "\n" + lines[j]
                    j += 1
                block.instrs.append(_parse_instr(i, text))
            else:
                block.instrs.append(_parse_instr(i, line))
            i = j
            continue
        if line.startswith("}"):
            fn.end_line = i
            return fn, i + 1
        if not line.strip() or line.lstrip().startswith(";"):
            i += 1
            continue
        lm = _LABEL.match(line)
        if lm:
            block = Block(unquote(lm.group("label")))
            fn.blocks.append(block)
            i += 1
            continue
        i += 1                                      # #dbg_ records and other continuations
    raise ValueError(f"function {fn.name} has no closing brace")


_LINKAGES = {"private", "internal", "available_externally", "linkonce", "weak", "common", "appending",
             "extern_weak", "linkonce_odr", "weak_odr", "external"}


# an instruction line whose result (if any) has a plain name: its opcode, its first !dbg
_PLAIN_INSTR = re.compile(r'  (?:%[-\w.$]+ = )?(\w+)(?=\s|$)(?:.*?!dbg !(\d+))?').match
_CALL_OPCODES = frozenset(("call", "invoke", "callbr", "tail", "musttail", "notail"))
_INLINE_ASM = re.compile(r'\s*\S+\s+asm\b')


def _parse_instr(line_no: int, text: str) -> Instr:
    body = text.strip()
    rhs = body.split(" = ", 1)[1] if body[:1] == "%" and _ASSIGNED.match(body) else body
    opcode = rhs.split(None, 1)[0] if rhs else ""
    if opcode in ("tail", "musttail", "notail"):
        opcode = "call"
    dbg = _DBG.search(text) if "!dbg !" in text else None
    ins = Instr(line_no, text, opcode, int(dbg.group(1)) if dbg else -1)
    if opcode in ("call", "invoke", "callbr"):
        ins.is_call = True
        kw = _CALL_KW.search(" " + rhs)
        after = rhs[kw.end() - 1:] if kw else rhs
        if _INLINE_ASM.match(after) or " asm " in after.split("(")[0]:
            ins.inline_asm = True
        else:
            cm = _CALLEE.search(after)
            if cm is None:
                ins.inline_asm = True
            elif cm.group(1).startswith("@"):
                ins.callee = unquote(cm.group(1)[1:])
            else:
                ins.indirect = True
    return ins


def successors(block: Block) -> list[str]:
    if not block.instrs:
        return []
    term = block.instrs[-1]
    if term.opcode not in TERMINATORS:
        return []
    out: list[str] = []
    for t in _TARGET.findall(term.text):
        t = unquote(t)
        if t not in out:
            out.append(t)
    return out


# ---- debug metadata ---------------------------------------------------------------------------

def fields(defn: str) -> dict[str, str]:
    """The `key: value` fields of a specialised metadata node such as !DILocation(...)."""
    inner = defn[defn.find("(") + 1: defn.rfind(")")]
    return {k: v.strip() for k, v in _FIELD.findall(inner)}


def _ref(value: str | None) -> int:
    if value and value.startswith("!") and value[1:].isdigit():
        return int(value[1:])
    return -1


class DebugInfo:
    """Resolves !dbg ids to (file, line) and DISubprogram ids to names, with caches."""

    def __init__(self, metadata: dict[int, str]):
        self.md = metadata
        self._loc: dict[int, tuple[str, int]] = {}
        self._scope_file: dict[int, str] = {}
        self._fields: dict[int, dict[str, str]] = {}
        self._chain: dict[int, list[tuple[str, int, int]]] = {}

    def _f(self, mid: int) -> dict[str, str]:
        got = self._fields.get(mid)
        if got is None:
            got = fields(self.md.get(mid, ""))
            self._fields[mid] = got
        return got

    def location(self, mid: int) -> tuple[str, int]:
        """(file, line) of a DILocation id; ("", 0) when unknown."""
        if mid < 0:
            return ("", 0)
        got = self._loc.get(mid)
        if got is None:
            fast = _LOCATION.match(self.md.get(mid, ""))
            if fast:
                got = (self.scope_file(int(fast.group(2))), int(fast.group(1)))
                self._loc[mid] = got
                return got
            f = self._f(mid)
            try:
                line = int(f.get("line", "0"))
            except ValueError:
                line = 0
            got = (self.scope_file(_ref(f.get("scope"))), line)
            self._loc[mid] = got
        return got

    def chain(self, mid: int) -> list[tuple[str, int, int]]:
        """(file, line, DILocation id) of a location and of the call sites it was inlined at,
        innermost first; the last entry is the line in the function that holds the code now."""
        got = self._chain.get(mid)
        if got is None:
            m = _LOCATION.match(self.md.get(mid, "")) if mid >= 0 else None
            if m is not None:               # the usual DILocation: one match gives all (as location())
                loc = self._loc.get(mid)
                if loc is None:
                    loc = self._loc[mid] = (self.scope_file(int(m.group(2))), int(m.group(1)))
                got = [(loc[0], loc[1], mid)]
                outer = int(m.group(3)) if m.group(3) else -1
            elif mid >= 0:
                got = [(*self.location(mid), mid)]
                outer = _ref(self._f(mid).get("inlinedAt"))
            else:
                got, outer = [("", 0, -1)], -1
            if outer >= 0 and outer != mid:
                got = got + self.chain(outer)
            self._chain[mid] = got
        return got

    def function_of(self, mid: int) -> str:
        """Display name of the function whose source a DILocation is in (inlined code: the callee)."""
        cur = _ref(self._f(mid).get("scope")) if mid >= 0 else -1
        guard = 0
        while cur >= 0 and guard < 64:
            if self.md.get(cur, "").startswith("!DISubprogram("):
                return self.subprogram(cur)[0]
            cur = _ref(self._f(cur).get("scope"))
            guard += 1
        return ""

    def scope_file(self, mid: int) -> str:
        if mid < 0:
            return ""
        got = self._scope_file.get(mid)
        if got is None:
            got = ""
            seen = 0
            cur = mid
            while cur >= 0 and seen < 64:
                defn = self.md.get(cur, "")
                f = self._f(cur)
                if defn.startswith("!DIFile("):
                    got = _file_name(f)
                    break
                if "file" in f:
                    got = _file_name(self._f(_ref(f["file"])))
                    break
                cur = _ref(f.get("scope"))
                seen += 1
            self._scope_file[mid] = got
        return got

    def subprogram(self, mid: int) -> tuple[str, str, int]:
        """(display name, file, line) of a DISubprogram id."""
        if mid < 0:
            return ("", "", 0)
        f = self._f(mid)
        name = f.get("name", "").strip('"')
        scope = _ref(f.get("scope"))
        prefix = []
        guard = 0
        while scope >= 0 and guard < 16:
            defn = self.md.get(scope, "")
            sf = self._f(scope)
            if defn.startswith(("!DICompositeType(", "!DINamespace(")) and "name" in sf:
                prefix.append(sf["name"].strip('"'))
            elif not defn.startswith(("!DICompositeType(", "!DINamespace(")):
                break
            scope = _ref(sf.get("scope"))
            guard += 1
        if prefix:
            name = "::".join(reversed(prefix)) + "::" + name
        try:
            line = int(f.get("line", "0"))
        except ValueError:
            line = 0
        return (name, self.scope_file(mid), line)

    def has_debug_info(self) -> bool:
        return any(d.startswith("!DICompileUnit(") for d in self.md.values())


def _file_name(f: dict[str, str]) -> str:
    name = f.get("filename", "").strip('"')
    directory = f.get("directory", "").strip('"')
    if not name.startswith("/") and directory:
        name = directory.rstrip("/") + "/" + name
    return posixpath.normpath(name) if name else ""
