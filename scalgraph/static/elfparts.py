"""Reading the PSG back out of files: parts from objects and archive members (section
.scalgraph.psg), the whole PSG from an executable (section .scalgraph.psgfull, or <exe>.psg.json)."""
from __future__ import annotations

import io
import json
import os

from scalgraph.errors import UserError
from scalgraph.model.psg import PSG, psg_from_dict

PART_SECTION = ".scalgraph.psg"
FULL_SECTION = ".scalgraph.psgfull"


def read_parts_from_files(paths: list[str]) -> list[dict]:
    parts: list[dict] = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            raise UserError(f"cannot read {path}: {e.strerror}") from None
        if data.startswith(b"!<arch>\n"):
            for member, blob in _archive_members(data, path):
                parts.extend(_parts_in_elf(blob, f"{path}({member})"))
        elif data.startswith(b"!<thin>\n"):             # thin archive: members stay in their files
            base = os.path.dirname(path)
            for member, _ in _archive_members(data, path, thin=True):
                parts.extend(read_parts_from_files([os.path.join(base, member)]))
        elif data.startswith(b"\x7fELF"):
            parts.extend(_parts_in_elf(data, path))
    return parts


def read_psg_from_executable(path: str) -> PSG:
    if not os.path.exists(path):
        raise UserError(f"{path} does not exist; give the executable built with sgcc/sgcxx/sgfort")
    blob = None
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None
    if data.startswith(b"\x7fELF"):
        blob = _section(data, FULL_SECTION, path)
    if blob is not None:
        text = blob.split(b"\0", 1)[0]
        where = f"{path} (section {FULL_SECTION})"
    elif os.path.exists(path + ".psg.json"):
        with open(path + ".psg.json", "rb") as fh:
            text = fh.read()
        where = path + ".psg.json"
    elif path.endswith(".json"):
        text, where = data, path
    else:
        raise UserError(f"{path} carries no PSG (no {FULL_SECTION} section and no {path}.psg.json); "
                        "build it with sgcc/sgcxx/sgfort")
    try:
        d = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise UserError(f"the PSG in {where} is not valid JSON; rebuild the program with sgcc") from None
    return psg_from_dict(d)


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
            out.append(json.loads(chunk))
        except ValueError:
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
            n = int(name[3:])
            name, body = body[:n].decode("utf-8", "replace").rstrip("\0"), body[n:]
        yield name.rstrip("/"), body
