"""The numpy dtypes the reader uses match the C records of instrument/scalgraph.h: checked through cffi
(sizeof/offsetof from the header as cdef) and against the C compiler itself."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import require_tool
from scalgraph.io.profile_file import COMM_DTYPE, HEADER_DTYPE
from scalgraph.model.profile import DEP_DTYPE
from scalgraph.runtime.shim import INSTRUMENT_DIR, header_cdef

RECORDS = {"struct sg_file_header": HEADER_DTYPE, "struct sg_dep_record": DEP_DTYPE,
           "struct sg_comm_record": COMM_DTYPE}


def numpy_layout(dtype: np.dtype) -> dict:
    return {"size": dtype.itemsize, **{name: dtype.fields[name][1] for name in dtype.names}}


@pytest.mark.parametrize("ctype", sorted(RECORDS))
def test_dtypes_match_the_cffi_layout_of_the_header(ctype):
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(header_cdef())
    dtype = RECORDS[ctype]
    got = {"size": ffi.sizeof(ctype), **{n: ffi.offsetof(ctype, n) for n in dtype.names}}
    assert got == numpy_layout(dtype)
    assert set(dtype.names) == {name for name, _ in ffi.typeof(ctype).fields}


def test_dtypes_match_what_the_c_compiler_lays_out(tmp_path):
    cc = shutil.which("cc")
    require_tool(cc is not None, "no C compiler (cc)")
    lines = []
    for ctype, dtype in RECORDS.items():
        fields = ", ".join(f'\\"{n}\\": %zu' for n in dtype.names)
        args = ", ".join(f"offsetof({ctype}, {n})" for n in dtype.names)
        lines.append(f'printf("\\"{ctype}\\": {{\\"size\\": %zu, {fields}}},\\n", sizeof({ctype}), {args});')
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "scalgraph.h"\n'
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", str(INSTRUMENT_DIR), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    layout = json.loads("{" + out.strip().rstrip(",") + "}")
    assert layout == {ctype: numpy_layout(dtype) for ctype, dtype in RECORDS.items()}
