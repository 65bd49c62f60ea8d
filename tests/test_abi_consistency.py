"""The generated PSG tables object repeats `struct sg_psg_tables` so it compiles with no include
path; this keeps that copy identical to the one in the shim's header."""
import re

from scalgraph.static import link


def test_generated_tables_struct_matches_the_shim_header(repo_root):
    header = (repo_root / "instrument" / "scalgraph.h").read_text()
    found = re.search(r"struct sg_psg_tables \{.*?\};", header, re.S)
    assert found, "struct sg_psg_tables not found in instrument/scalgraph.h"
    squash = lambda s: " ".join(s.split())  # noqa: E731
    assert squash(found.group(0)) == squash(link._STRUCT)


def _c_enum(text: str, name: str) -> int:
    found = re.search(rf"\b{name}\s*=\s*(\d+)", text)
    assert found, f"{name} not found"
    return int(found.group(1))


def test_raw_trace_reader_matches_the_shim_header(repo_root):
    """scalgraph/io/trace_shim.py decodes what instrument/sg_trace.c writes: same version, kinds,
    field bits in the same order, and record sizes."""
    from scalgraph.io import trace_shim
    from scalgraph.model import trace as tm
    h = (repo_root / "instrument" / "sg_trace.h").read_text()
    assert _c_enum(h, "SG_TRACE_VERSION") == trace_shim.VERSION
    assert _c_enum(h, "SG_TRACE_NAME_LEN") == trace_shim.NAME_LEN
    assert _c_enum(h, "SG_TEV_WINDOW_DEF") == trace_shim.WINDOW_DEF
    for i, kind in enumerate(tm.EVENT_KINDS):
        assert _c_enum(h, f"SG_TEV_{kind}") == i
    bits = [_c_enum(h, f"SG_TF_{name.upper()}") for name, _ in trace_shim.FIELDS]
    assert bits == [1 << i for i in range(len(trace_shim.FIELDS))]
    sizes = {m.group(1): int(m.group(2)) for m in re.finditer(r"struct (sg_trace_\w+) \{\s*/\* (\d+) bytes", h)}
    assert sizes == {"sg_trace_block_header": trace_shim.BLOCK_DTYPE.itemsize,
                     "sg_trace_file_header": trace_shim.HEADER_DTYPE.itemsize,
                     "sg_trace_poll": trace_shim.POLL_DTYPE.itemsize,
                     "sg_trace_file_trailer": trace_shim.TRAILER_DTYPE.itemsize}


def test_otf2_records_match_the_event_dtype(repo_root):
    """scalgraph/io/otf2_events.c stores EVENT_DTYPE events: same field order and types, packed."""
    from scalgraph.model import trace as tm
    c = (repo_root / "scalgraph" / "io" / "otf2_events.c").read_text()
    body = re.search(r"struct __attribute__\(\(packed\)\) sg_otf2_record \{(.*?)\};", c, re.S).group(1)
    ctype = {"double": "<f8", "uint8_t": "|u1", "int32_t": "<i4", "int64_t": "<i8"}
    fields = [(name.strip(), ctype[decl.split()[0]]) for decl in body.strip().rstrip(";").split(";")
              for name in " ".join(decl.split()[1:]).split(",")]
    assert fields == [(n, tm.EVENT_DTYPE.fields[n][0].str) for n in tm.EVENT_DTYPE.names]
    for i, kind in enumerate(tm.EVENT_KINDS):
        assert _c_enum(c, kind) == i
