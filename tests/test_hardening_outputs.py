"""Outputs the user names: a regular file is replaced atomically (a symbolic link at the name is
replaced, never followed), a device or a name under /dev is written through, never renamed over
(`sgcc -o /dev/null`, as configure and CMake probes compile, and /dev/stdout)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_tool
from scalgraph.errors import UserError
from scalgraph.io.safe_write import output_destination, write_output
from test_driver_build import HAVE_ZIG, MPICC, instrumentation_available, sg

PROG = "#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n"


def _listing(d: Path) -> dict:
    return {p.name: (p.is_symlink(), p.read_bytes() if p.is_file() else None) for p in d.iterdir()}


def _devnull_intact():
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and not os.path.lexists("/dev/null.psg.json")


def test_where_an_output_goes(tmp_path):
    (tmp_path / "real").write_bytes(b"old")
    (tmp_path / "link").symlink_to("real")
    assert output_destination("/dev/null") == ("/dev/null", True)
    assert output_destination("/dev/stdout") == ("/dev/stdout", True)     # a link into /proc: written through
    assert output_destination(tmp_path / "new") == (str(tmp_path / "new"), False)
    assert output_destination(tmp_path / "link") == (str(tmp_path / "link"), False)
    with pytest.raises(UserError, match="directory"):
        output_destination(tmp_path)


def test_an_output_at_a_symlink_replaces_the_link_and_dev_null_is_written_through(tmp_path):
    (tmp_path / "victim").write_bytes(b"keep")
    (tmp_path / "link").symlink_to("victim")
    write_output(tmp_path / "link", b"new")
    assert not (tmp_path / "link").is_symlink() and (tmp_path / "link").read_bytes() == b"new"
    assert (tmp_path / "victim").read_bytes() == b"keep"
    write_output("/dev/null", b"discarded")
    _devnull_intact()
    assert sorted(os.listdir(tmp_path)) == ["link", "victim"]      # no temporary file left


@pytest.fixture
def plain_build():
    require_tool(MPICC is not None and HAVE_ZIG, "no MPI/zig in the venv (pip install mpich ziglang)")


def test_sgcc_builds_into_dev_null_like_a_configure_probe(tmp_path, plain_build):
    (tmp_path / "conftest.c").write_text(PROG)
    before = _listing(tmp_path)
    for args in (["conftest.c", "-o", "/dev/null"], ["-c", "conftest.c", "-o", "/dev/null"]):
        r = sg("sgcc", args, tmp_path)
        assert r.returncode == 0 and r.stderr == ""
        _devnull_intact()
        assert _listing(tmp_path) == before                   # nothing beside it, nothing in the build tree


def test_sgcc_instrumented_compile_into_dev_null(tmp_path, plain_build):
    require_tool(instrumentation_available(), "static pass not installed")
    (tmp_path / "conftest.c").write_text(PROG)
    r = sg("sgcc", ["-c", "conftest.c", "-o", "/dev/null"], tmp_path, mode="instrumented")
    assert r.returncode == 0
    _devnull_intact()
    assert sorted(os.listdir(tmp_path)) == ["conftest.c"]


def test_sgcc_executable_mode_and_output_to_stdout(tmp_path, plain_build):
    (tmp_path / "p.c").write_text(PROG)
    sg("sgcc", ["p.c", "-o", "app"], tmp_path)
    mode = stat.S_IMODE((tmp_path / "app").stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o777 & ~umask                                 # as cc leaves an executable
    assert os.path.islink("/dev/stdout")
    with open(tmp_path / "redirected", "wb") as out:
        code = "import sys; from scalgraph.static.driver import main; sys.exit(main('c', sys.argv[1:]))"
        r = subprocess.run([sys.executable, "-c", code, "p.c", "-o", "/dev/stdout"], cwd=tmp_path, stdout=out,
                           stderr=subprocess.PIPE, text=True, env=dict(os.environ, SCALGRAPH_NO_INSTRUMENT="1"),
                           timeout=300)
    assert r.returncode == 0, r.stderr
    assert os.path.islink("/dev/stdout") and not os.path.lexists("/dev/stdout.psg.json")
    assert (tmp_path / "redirected").read_bytes()[:4] == b"\x7fELF"


def test_a_failed_file_operation_is_one_line_in_one_shape(tmp_path):
    from scalgraph.errors import os_failure
    from scalgraph.io.safe_read import read_regular
    err = os_failure(FileExistsError(17, "File exists"), "cannot create x", "choose another -o",
                     {FileExistsError: "a file is in the way"})
    assert str(err) == "cannot create x: a file is in the way; choose another -o"
    assert str(os_failure(PermissionError(13, "Permission denied"), "cannot write y")) == \
        "cannot write y: Permission denied"
    assert str(os_failure(OSError("odd\nthing"), "cannot write z")) == "cannot write z: odd\\nthing"
    with pytest.raises(UserError, match="no such trace file"):
        read_regular(tmp_path / "absent", "trace file")
    with pytest.raises(UserError, match="is a directory, not a regular trace file"):
        read_regular(tmp_path, "trace file")
    with pytest.raises(UserError, match=r"cannot write .*/sub/f: the directory .*/sub does not exist"):
        write_output(tmp_path / "sub" / "f", b"x")


def test_export_to_a_device_or_stdout_writes_through(tmp_path):
    """`export --perfetto /dev/stdout --force` used to rename its temporary file over /dev/stdout (as
    root: the link replaced by a regular file); a device or a FIFO is written through, needs no --force."""
    from scalgraph.io.trace_read import write_trace
    from test_export_perfetto import late_sender_trace, validate
    src = tmp_path / "t.sgtrace"
    write_trace(late_sender_trace(), src)
    for extra in ([], ["--force"]):
        with open(tmp_path / "redirected", "wb") as out:
            r = subprocess.run([sys.executable, "-m", "scalgraph.cli", "export", str(src), "--perfetto", "/dev/stdout",
                                *extra], stdout=out, stderr=subprocess.PIPE, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert os.path.islink("/dev/stdout")
        validate(json.loads((tmp_path / "redirected").read_text()))
    r = subprocess.run([sys.executable, "-m", "scalgraph.cli", "export", str(src), "--perfetto", "/dev/null"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    _devnull_intact()
    assert sorted(os.listdir(tmp_path)) == ["redirected", "t.sgtrace"]
