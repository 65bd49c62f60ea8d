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
