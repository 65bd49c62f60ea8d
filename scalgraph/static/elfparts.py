"""Reading the PSG back out of files: parts from objects and archive members (section
.scalgraph.psg), the whole PSG from an executable (section .scalgraph.psgfull, or <exe>.psg.json)."""
from __future__ import annotations

import io
import os

from scalgraph.errors import UserError
from scalgraph.io.safe_read import MAX_JSON_BYTES, parse_json, psg_checked, read_regular
from scalgraph.model.psg import PSG

PART_SECTION = ".scalgraph.psg"
FULL_SECTION = ".scalgraph.psgfull"


MAX_EXECUTABLE_BYTES = 8 << 30


def read_parts_from_files(paths: list[str], _in_thin: bool = False) -> list[dict]:
    parts: list[dict] = []
    for path in paths:
        data = read_regular(path, "object file or library", MAX_EXECUTABLE_BYTES)
        if data.startswith(b"!<arch>\n"):
            for member, blob in _archive_members(data, path):
                parts.extend(_parts_in_elf(blob, f"{path}({member})"))
        elif data.startswith(b"!<thin>\n") and not _in_thin:   # members stay in their files (never archives)
            base = os.path.dirname(path)
            for member, _ in _archive_members(data, path, thin=True):
                parts.extend(read_parts_from_files([os.path.join(base, member)], _in_thin=True))
        elif data.startswith(b"\x7fELF"):
            parts.extend(_parts_in_elf(data, path))
    return parts


def read_psg_from_executable(path: str) -> PSG:
    if not os.path.lexists(path):
        raise UserError(f"{path} does not exist; give the executable built with sgcc/sgcxx/sgfort")
    data = read_regular(path, "executable", MAX_EXECUTABLE_BYTES)
    blob = _section(data, FULL_SECTION, path) if data.startswith(b"\x7fELF") else None
    if blob is not None:
        text = blob.split(b"\0", 1)[0]
        where = f"{path} (section {FULL_SECTION})"
    elif os.path.lexists(path + ".psg.json"):
        where = path + ".psg.json"
        text = read_regular(where, "PSG file", MAX_JSON_BYTES)
    elif path.endswith(".json"):
        text, where = data, path
    else:
        raise UserError(f"{path} carries no PSG (no {FULL_SECTION} section and no {path}.psg.json); "
                        "build it with sgcc/sgcxx/sgfort")
    return psg_checked(parse_json(text, where, "Program Structure Graph"), where)


def _parts_in_elf(data: bytes, where: str) -> list[dict]:
    blob = _section(data, PART_SECTION, where)
    if not blob:
        return []
    out = []
    for chunk in blob.split(b"\0"):
        chunk = chunk.strip(b"\0 \n")
        if not chunk:
            continue
        try:
            out.append(parse_json(chunk, where, "PSG part"))
        except UserError:
            raise UserError(f"{where}: the PSG part in section {PART_SECTION} is damaged; "
                            "recompile this file with sgcc") from None
    return out


def _section(data: bytes, name: str, where: str) -> bytes | None:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    try:
        elf = ELFFile(io.BytesIO(data))
        sec = elf.get_section_by_name(name)
        return None if sec is None else sec.data()
    except ELFError as e:
        raise UserError(f"{where}: not a readable ELF file ({e})") from None
    except Exception as e:   # pyelftools meets a forged header with struct, index or value errors
        raise UserError(f"{where}: damaged ELF file ({type(e).__name__}); rebuild it") from None


def _archive_members(data: bytes, path: str, thin: bool = False):
    """(name, bytes) of each member of a System V / GNU ar archive (thin: names only, the data
    are not in the archive)."""
    pos = 8
    long_names = b""
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode("ascii", "replace").strip()
        try:
            size = int(header[48:58].decode("ascii").strip())
            if size < 0:
                raise ValueError(size)
        except ValueError:
            raise UserError(f"{path}: damaged archive member header; rebuild the library") from None
        stored = size if not thin or name in ("//", "/", "/SYM64/") else 0
        body = data[pos + 60:pos + 60 + stored]
        pos += 60 + stored + (stored & 1)
        if name == "//":
            long_names = body
            continue
        if name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            continue
        if name.startswith("/") and name[1:].isdigit():
            off = int(name[1:])
            end = long_names.find(b"/\n", off)
            name = long_names[off:end if end >= 0 else None].decode("utf-8", "replace")
        elif name.startswith("#1/"):                # BSD: name stored before the data
            n = int(name[3:]) if name[3:].isdigit() else 0
            name, body = body[:n].decode("utf-8", "replace").rstrip("\0"), body[n:]
        yield name.rstrip("/"), body
