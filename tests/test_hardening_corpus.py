"""A generated corpus of bad inputs against every command (psg, detect, run, sgcc): corrupt, truncated,
forged, hostile, huge and special files, and bad arguments.  Each case asserts what a careless or
hostile user must get: exit status non-zero, one line on stderr naming the problem, no traceback, no
hang (an alarm), and every file that existed before byte-identical afterwards (nothing new either).

The commands run in-process through scalgraph.cli.main (fast); sgcc and a few others run as
subprocesses, as a user starts them."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import zlib

import numpy as np
import pytest

from scalgraph import cli
from scalgraph.analysis import synthetic as syn
from scalgraph.io import profile_file as pf
from test_detect_cli import write_synthetic_experiment

ALARM_S = 20
PY = sys.executable
BIN = pathlib.Path(sys.executable).parent


# ---- the harness ---------------------------------------------------------------------------------

def snapshot(root: pathlib.Path) -> dict:
    """Every path under root (and root's siblings' content is under tmp_path too): kind and content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = pathlib.Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[str(p)] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode) and st.st_size > 64 << 20:     # the sparse "huge" inputs
                out[str(p)] = ("big file", st.st_size, st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                out[str(p)] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(), stat.S_IMODE(st.st_mode))
            elif stat.S_ISDIR(st.st_mode):
                out[str(p)] = ("dir",)
            else:
                out[str(p)] = ("special", stat.S_IFMT(st.st_mode))
    return out


class Hang(BaseException):      # not an Exception: the command line's last-resort handler must not eat it
    pass


def _alarm(signum, frame):
    raise Hang(f"no answer within {ALARM_S} s")


def run_cli(argv, capsys, cwd: pathlib.Path):
    old = signal.signal(signal.SIGALRM, _alarm)
    here = os.getcwd()
    os.chdir(cwd)
    signal.alarm(ALARM_S)
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as e:                # argparse: usage line + error line
        code = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(here)
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code, err, fragment, before, after, argparse_error=False):
    assert code not in (0, None), err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    if argparse_error:
        assert lines[-1].startswith("usage:") or "error:" in lines[-1], err
    else:
        assert len(lines) == 1, err
        assert lines[0].startswith("scalgraph "), err
    assert fragment.lower() in err.lower(), err
    assert "\x1b" not in err
    assert after == before, "files changed: " + ", ".join(
        sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))


# ---- inputs ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A valid synthetic experiment, a valid PSG dict and a runnable 'program' (a script with its
    .psg.json beside it), built once and copied into each case's directory."""
    d = tmp_path_factory.mktemp("corpus-base")
    psg, runs, _ = syn.cg_like()
    small = {p: runs[p] for p in list(runs)[:2]}
    write_synthetic_experiment(d / "exp", psg, small)
    (d / "app").write_text("#!/bin/sh\nexit 0\n")
    (d / "app").chmod(0o755)
    (d / "app.psg.json").write_text(json.dumps(psg.to_dict()))
    return d


@pytest.fixture
def case_dir(tmp_path, base):
    work = tmp_path / "w"
    shutil.copytree(base, work, symlinks=True)
    (work / "victim").mkdir()
    (work / "victim" / "stdout.txt").write_text("someone else's file\n")
    return work


def _psg_dict(work) -> dict:
    return json.loads((work / "app.psg.json").read_text())


def _first_rank_file(work) -> pathlib.Path:
    return sorted((work / "exp").glob("scale-*/rep-0/rank-0.sgp"))[0]


def _rewrite_header(path: pathlib.Path, **fields):
    """Change header fields and recompute the CRC, as a forger would."""
    data = bytearray(path.read_bytes())
    h = np.frombuffer(bytes(data[:pf.HEADER_DTYPE.itemsize]), pf.HEADER_DTYPE).copy()
    for k, v in fields.items():
        h[k] = v
    data[:pf.HEADER_DTYPE.itemsize] = h.tobytes()
    _recrc(path, data)


def _recrc(path, data: bytearray):
    at = pf.HEADER_DTYPE.fields["checksum"][1]
    data[at:at + 8] = bytes(8)
    data[at:at + 8] = zlib.crc32(bytes(data)).to_bytes(8, "little")
    path.write_bytes(bytes(data))


def _forge_dep(path: pathlib.Path, field: str, value):
    data = bytearray(path.read_bytes())
    h = np.frombuffer(bytes(data[:pf.HEADER_DTYPE.itemsize]), pf.HEADER_DTYPE)[0]
    nv, nc, nd = int(h["nvertices"]), int(h["ncounters"]), int(h["ndeps"])
    assert nd > 0
    off = pf.HEADER_DTYPE.itemsize + nv * 8 * (8 + nc)
    deps = np.frombuffer(bytes(data[off:off + nd * pf.DEP_DTYPE.itemsize]), pf.DEP_DTYPE).copy()
    deps[field][0] = value
    data[off:off + deps.nbytes] = deps.tobytes()
    _recrc(path, data)


def _edit_json(path: pathlib.Path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def _setitem(key, value):
    def f(d):
        d[key] = value
    return f


def _col(key, fn):
    def f(d):
        d[key] = fn(copy.deepcopy(d[key]))
    return f


def _run0(fn):
    def f(d):
        fn(d["runs"][0])
    return f


DEEP = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJ = b'{"a":' * 50_000 + b"1" + b"}" * 50_000


def _write(rel, data):
    def setup(w):
        p = w / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() or p.is_symlink():
            p.unlink()
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return setup


def _fifo(rel):
    def setup(w):
        p = w / rel
        if p.exists():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        os.mkfifo(p)
    return setup


def _json_edit(rel, fn):
    return lambda w: _edit_json(w / rel, fn)


def _seq(*fns):
    def setup(w):
        for f in fns:
            f(w)
    return setup


# PSG column damage: (id, edit of the PSG dict, a word the message must contain)
PSG_DAMAGE = [
    ("kind-strings", _col("kind", lambda c: ["LOOP"] * len(c)), "kind"),
    ("kind-out-of-range", _col("kind", lambda c: [99] + c[1:]), "kind"),
    ("kind-bool", _col("kind", lambda c: [True] + c[1:]), "kind"),
    ("kind-empty", _col("kind", lambda c: []), "kind"),
    ("name-ints", _col("name", lambda c: list(range(len(c)))), "name"),
    ("name-short", _col("name", lambda c: c[:-1]), "name"),
    ("file-null", _setitem("file", None), "file"),
    ("line-float", _col("line_first", lambda c: [1.5] + c[1:]), "line_first"),
    ("line-huge", _col("line_first", lambda c: [10 ** 30] + c[1:]), "line_first"),
    ("line-negative", _col("line_last", lambda c: [-5] + c[1:]), "line_last"),
    ("parent-out-of-range", _col("parent", lambda c: c[:-1] + [10 ** 6]), "parent"),
    ("parent-after-child", _col("parent", lambda c: [-1, 2] + c[2:]), "pre-order"),
    ("children-out-of-range", _col("children", lambda c: [[10 ** 6]] + c[1:]), "children"),
    ("children-not-lists", _col("children", lambda c: [5] + c[1:]), "children"),
    ("children-loop", _col("children", lambda c: [c[0] + [0]] + c[1:]), "disagree"),
    ("recursion-out-of-range", _col("recursion_target", lambda c: [10 ** 6] + c[1:]), "recursion_target"),
    ("functions-ints", _setitem("functions", [1, 2]), "functions"),
    ("inst-vid-out-of-range", _col("inst_vid", lambda c: [[10 ** 6]] + c[1:]), "inst_vid"),
    ("inst-func-out-of-range", _col("inst_func", lambda c: [10 ** 6] + c[1:]), "inst_func"),
    ("meta-list", _setitem("meta", []), "meta"),
    ("missing-column", lambda d: d.pop("children"), "children"),
    ("version-string", _setitem("version", "1"), "version"),
    ("version-2", _setitem("version", 2), "version"),
    ("format-missing", lambda d: d.pop("format"), "format"),
    ("hash-forged", _setitem("hash", "0123456789abcdef"), "hash"),
]

JSON_DAMAGE = [  # (id, bytes, message fragment)
    ("invalid", b'{"format": ', "not valid JSON"),
    ("deep-array", DEEP, "levels deep"),
    ("deep-object", DEEP_OBJ, "levels deep"),
    ("top-list", b"[1, 2]", ""),
    ("null", b"null", ""),
    ("nan", b'{"format": "scalgraph-psg", "version": NaN}', "not valid JSON"),
    ("not-utf8", b'{"format": "\xff\xfe"}', "UTF-8"),
    ("empty", b"", "not valid JSON"),
]


def psg_cases():
    cases = [
        ("missing", lambda w: None, ["psg", "nope"], "does not exist"),
        ("directory", lambda w: None, ["psg", "exp"], "directory"),
        ("fifo", _fifo("app2"), ["psg", "app2"], "FIFO"),
        ("devnull", lambda w: None, ["psg", "/dev/null"], "character device"),
        ("empty", _write("app2", b""), ["psg", "app2"], "carries no PSG"),
        ("random", _write("app2", bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8))),
         ["psg", "app2"], "carries no PSG"),
        ("elf-header-only", lambda w: (w / "app2").write_bytes(pathlib.Path(PY).resolve().read_bytes()[:64]),
         ["psg", "app2"], "ELF"),
        ("elf-truncated", lambda w: (w / "app2").write_bytes(pathlib.Path(PY).resolve().read_bytes()[:3000]),
         ["psg", "app2"], "ELF"),
        ("elf-forged-shoff", lambda w: (w / "app2").write_bytes(_forged_elf()), ["psg", "app2"], "ELF"),
        ("elf-without-psg", lambda w: shutil.copy(pathlib.Path(PY).resolve(), w / "app2"), ["psg", "app2"],
         "carries no PSG"),
        ("psg-json-fifo", _fifo("app.psg.json"), ["psg", "app"], "FIFO"),
        ("psg-json-huge", lambda w: os.truncate(w / "app.psg.json", 3 << 30), ["psg", "app"], "bytes, more than"),
        ("psg-json-dir", lambda w: ((w / "app.psg.json").unlink(), (w / "app.psg.json").mkdir()), ["psg", "app"],
         "directory"),
        ("json-output-is-input", lambda w: None, ["psg", "app", "--json", "app"], "destroy"),
        ("json-output-missing-dir", lambda w: None, ["psg", "app", "--json", "no/such/dir/out.json"], "does not exist"),
        ("json-output-is-dir", lambda w: None, ["psg", "app", "--json", "exp"], "directory"),
        ("dot-and-json-same", lambda w: None, ["psg", "app", "--json", "o", "--dot", "o"], "two files"),
        ("max-loop-depth-negative", lambda w: None, ["psg", "app", "--max-loop-depth", "-1"], "0 or more"),
    ]
    for name, edit, frag in PSG_DAMAGE:
        cases.append((f"psg-{name}", _json_edit("app.psg.json", edit), ["psg", "app"], frag))
    for name, data, frag in JSON_DAMAGE:
        cases.append((f"psg-json-{name}", _write("app.psg.json", data), ["psg", "app"], frag or "PSG"))
    return cases


def _forged_elf() -> bytes:
    data = bytearray(pathlib.Path(PY).resolve().read_bytes()[:8192])
    data[0x28:0x30] = (2 ** 62).to_bytes(8, "little")    # e_shoff far beyond the file
    data[0x3c:0x3e] = (0xFFFF).to_bytes(2, "little")     # e_shnum
    return bytes(data)


EXP_JSON = "exp/experiment.json"
RANK_DAMAGE = [
    ("truncated", lambda p: p.write_bytes(p.read_bytes()[:-9]), "truncated"),
    ("header-only-part", lambda p: p.write_bytes(p.read_bytes()[:40]), "truncated"),
    ("wrong-magic", lambda p: p.write_bytes(b"XXXXXXXX" + p.read_bytes()[8:]), "magic"),
    ("wrong-version", lambda p: p.write_bytes(p.read_bytes()[:8] + (9).to_bytes(4, "little") + p.read_bytes()[12:]),
     "version"),
    ("bit-flip", lambda p: p.write_bytes(p.read_bytes()[:-1] + bytes([p.read_bytes()[-1] ^ 1])), "checksum"),
    ("fifo", lambda p: (p.unlink(), os.mkfifo(p)), "FIFO"),
    ("directory", lambda p: (p.unlink(), p.mkdir()), "directory"),
    ("forged-nranks", lambda p: _rewrite_header(p, nranks=2 ** 31 - 1), "ranks"),
    ("forged-rank", lambda p: _rewrite_header(p, rank=7), "rank"),
    ("forged-hash", lambda p: _rewrite_header(p, psg_hash=b"feedfacefeedface"), "PSG"),
    ("forged-nan-time", lambda p: _rewrite_header(p, start_time=np.nan), "start_time"),
    ("forged-inf-hz", lambda p: _rewrite_header(p, hz=np.inf), "hz"),
    ("forged-counts", lambda p: _rewrite_header(p, nvertices=3), "inconsistent"),
    ("forged-dep-rank", lambda p: _forge_dep(p, "rank", 10 ** 6), "record"),
    ("forged-dep-vertex", lambda p: _forge_dep(p, "vertex", -4), "record"),
    ("forged-dep-peer", lambda p: _forge_dep(p, "peer", 10 ** 6), "record"),
    ("forged-dep-wait", lambda p: _forge_dep(p, "wait", np.nan), "record"),
    ("missing", lambda p: p.unlink(), "no profile file from rank"),
    ("huge", lambda p: os.truncate(p, 80 << 30), "bytes, more than"),
]


def _rank(fn):
    return lambda w: fn(_first_rank_file(w))


def detect_cases():
    d = ["detect"]
    cases = [
        ("missing", lambda w: None, d + ["nope"], "no such experiment"),
        ("is-file", lambda w: None, d + ["app"], "is a file"),
        ("is-fifo", _fifo("fifo"), d + ["fifo"], "is a file"),
        ("empty-dir", lambda w: (w / "empty").mkdir(), d + ["empty"], "no experiment.json"),
        ("no-experiment-json", lambda w: (w / EXP_JSON).unlink(), d + ["exp"], "no experiment.json"),
        ("experiment-json-fifo", _fifo(EXP_JSON), d + ["exp"], "FIFO"),
        ("experiment-json-dir", lambda w: ((w / EXP_JSON).unlink(), (w / EXP_JSON).mkdir()), d + ["exp"],
         "directory"),
        ("psg-json-missing", lambda w: (w / "exp/psg.json").unlink(), d + ["exp"], "no psg.json"),
        ("psg-json-fifo", _fifo("exp/psg.json"), d + ["exp"], "FIFO"),
        ("format-missing", _json_edit(EXP_JSON, lambda x: x.pop("format")), d + ["exp"], "format"),
        ("version-string", _json_edit(EXP_JSON, _setitem("version", "1")), d + ["exp"], "'1' (a str)"),
        ("version-2", _json_edit(EXP_JSON, _setitem("version", 2)), d + ["exp"], "version 2"),
        ("version-bool", _json_edit(EXP_JSON, _setitem("version", True)), d + ["exp"], "version"),
        ("runs-missing", _json_edit(EXP_JSON, lambda x: x.pop("runs")), d + ["exp"], "no list of runs"),
        ("runs-dict", _json_edit(EXP_JSON, _setitem("runs", {"a": 1})), d + ["exp"], "no list of runs"),
        ("run-entry-list", _json_edit(EXP_JSON, lambda x: x["runs"].__setitem__(0, [1, 2])), d + ["exp"],
         "malformed run entry"),
        ("run-scale-string", _json_edit(EXP_JSON, _run0(_setitem("scale", "x"))), d + ["exp"], "malformed"),
        ("run-scale-bool", _json_edit(EXP_JSON, _run0(_setitem("scale", True))), d + ["exp"], "malformed"),
        ("run-scale-float", _json_edit(EXP_JSON, _run0(_setitem("scale", 2.5))), d + ["exp"], "malformed"),
        ("run-scale-negative", _json_edit(EXP_JSON, _run0(_setitem("scale", -2))), d + ["exp"], "malformed"),
        ("run-dir-absolute", _json_edit(EXP_JSON, _run0(_setitem("dir", "/etc"))), d + ["exp"], "not a relative"),
        ("run-dir-escape", _json_edit(EXP_JSON, _run0(_setitem("dir", "../victim"))), d + ["exp"], "outside"),
        ("run-dir-null", _json_edit(EXP_JSON, _run0(_setitem("dir", None))), d + ["exp"], "run directory"),
        ("run-dir-symlink-out", lambda w: _symlink_run_dir(w), d + ["exp"], "outside"),
        ("no-ok-runs", _json_edit(EXP_JSON, lambda x: [r.__setitem__("status", "failed") for r in x["runs"]]),
         d + ["exp"], "no successful runs"),
        ("experiment-psg-hash", _json_edit(EXP_JSON, _setitem("psg_hash", "0000000000000000")), d + ["exp"],
         "different builds"),
        ("abnorm-thd-nan", lambda w: None, d + ["exp", "--abnorm-thd", "nan"], "finite"),
        ("abnorm-thd-inf", lambda w: None, d + ["exp", "--abnorm-thd", "inf"], "finite"),
        ("abnorm-thd-1", lambda w: None, d + ["exp", "--abnorm-thd", "1"], "above 1"),
        ("min-share-nan", lambda w: None, d + ["exp", "--min-share", "nan"], "finite"),
        ("min-share-2", lambda w: None, d + ["exp", "--min-share", "2"], "between 0 and 1"),
        ("top-0", lambda w: None, d + ["exp", "--top", "0"], "--top"),
        ("clusters-negative", lambda w: None, d + ["exp", "--clusters", "-1"], "--clusters"),
    ]
    for name, data, frag in JSON_DAMAGE:
        cases.append((f"experiment-json-{name}", _write(EXP_JSON, data), d + ["exp"], frag or "experiment"))
    for name, data, frag in JSON_DAMAGE[:3]:
        cases.append((f"psg-json-{name}", _write("exp/psg.json", data), d + ["exp"], frag))
    for name, edit, frag in PSG_DAMAGE[:8]:
        cases.append((f"psg-{name}", _json_edit("exp/psg.json", edit), d + ["exp"], frag))
    for name, damage, frag in RANK_DAMAGE:
        cases.append((f"rank-{name}", _rank(damage), d + ["exp"], frag))
    return cases


def _symlink_run_dir(w):
    run = sorted((w / "exp").glob("scale-*/rep-0"))[0]
    shutil.rmtree(run)
    run.symlink_to(w / "victim")


def run_cases():
    r = ["run", "--mpiexec", "/bin/true"]
    app = ["--", "./app"]
    o = ["-o", "newexp"]
    cases = []
    for text, frag in (("", "at least one"), ("0", "at least one"), ("2,2", "twice"), ("a", "whole numbers"),
                       ("-1", "whole numbers"), ("1.5", "whole numbers"), ("99999999", "at least one"),
                       ("2,,x", "whole numbers"), ("٣", "whole numbers")):
        cases.append((f"scales-{text or 'empty'}", lambda w: None, r + ["-n", text] + o + app, frag))
    for opt, value, frag in (("--repeat", "0", "--repeat"), ("--repeat", "5000", "--repeat"),
                             ("--hz", "nan", "finite"), ("--hz", "inf", "finite"), ("--hz", "-1", "--hz"),
                             ("--hz", "20000", "--hz"), ("--timeout", "nan", "finite"),
                             ("--timeout", "-1", "--timeout"), ("--timeout", "inf", "finite")):
        cases.append((f"{opt[2:]}-{value}", lambda w: None, r + ["-n", "2", opt, value] + o + app, frag))
    cases += [
        ("no-program", lambda w: None, r + ["-n", "2", "--"], "no program"),
        ("program-missing", lambda w: None, r + ["-n", "2", "--", "./nope"], "no such program"),
        ("program-dir", lambda w: None, r + ["-n", "2", "--", "./exp"], "not an executable"),
        ("program-not-executable", lambda w: None, r + ["-n", "2", "--", "./app.psg.json"], "not an executable"),
        ("program-fifo", lambda w: (os.mkfifo(w / "pipe"), os.chmod(w / "pipe", 0o755)), r + ["-n", "2", "--", "./pipe"],
         "FIFO"),
        ("program-without-psg", lambda w: shutil.copy(pathlib.Path(PY).resolve(), w / "plain"),
         r + ["-n", "2", "--", "./plain"], "not built with sgcc"),
        ("program-deep-psg", _write("app.psg.json", DEEP), r + ["-n", "2"] + o + app, "levels deep"),
        ("program-forged-psg", _json_edit("app.psg.json", _setitem("hash", "x")), r + ["-n", "2"] + o + app, "hash"),
        ("unknown-placeholder", lambda w: None, r + ["-n", "2"] + o + app + ["{q}"], "{q}"),
        ("trace-filter-without-trace", lambda w: (w / "f.txt").write_text("1\n"),
         r + ["-n", "2", "--trace-filter", "f.txt"] + o + app, "--trace"),
        ("mpiexec-args-quote", lambda w: None, r + ["-n", "2", "--mpiexec-args", "'unbalanced"] + o + app,
         "--mpiexec-args"),
        ("mpiexec-missing", lambda w: None, ["run", "--mpiexec", "/no/such/mpiexec", "-n", "2"] + o + app,
         "not found"),
        ("output-under-file", lambda w: None, r + ["-n", "2", "-o", "app/sub"] + app, "a file"),
        ("output-is-file", lambda w: None, r + ["-n", "2", "-o", "app.psg.json"] + app, "is a file"),
        ("output-unwritable", lambda w: None, r + ["-n", "2", "-o", "/proc/scalgraph-corpus/exp"] + app,
         "cannot create"),
        ("output-not-experiment", lambda w: None, r + ["-n", "2", "-o", "victim"] + app, "not a scalgraph experiment"),
        ("force-not-experiment", lambda w: None, r + ["-n", "2", "--force", "-o", "victim"] + app,
         "refusing to delete"),
        ("force-symlink", lambda w: (w / "link").symlink_to(w / "exp"), r + ["-n", "2", "--force", "-o", "link"] + app,
         "symbolic link"),
        ("resume-dir-escape", _json_edit(EXP_JSON, _run0(_setitem("dir", "../victim"))),
         r + ["-n", "2", "-o", "exp"] + app, "refusing"),
        ("resume-dir-absolute", _json_edit(EXP_JSON, _run0(_setitem("dir", "/tmp"))),
         r + ["-n", "2", "-o", "exp"] + app, "refusing"),
        ("resume-run-dir-symlink", lambda w: _symlink_run_dir(w), r + ["-n", "2", "-o", "exp"] + app, "outside"),
        ("resume-scale-string", _json_edit(EXP_JSON, _run0(_setitem("scale", "2"))),
         r + ["-n", "2", "-o", "exp"] + app, "whole numbers"),
        ("resume-version-string", _json_edit(EXP_JSON, _setitem("version", "1")), r + ["-n", "2", "-o", "exp"] + app,
         "version '1'"),
        ("resume-deep", _write(EXP_JSON, DEEP), r + ["-n", "2", "-o", "exp"] + app, "levels deep"),
        ("resume-invalid", _write(EXP_JSON, b"{"), r + ["-n", "2", "-o", "exp"] + app, "--force"),
        ("resume-fifo", _fifo(EXP_JSON), r + ["-n", "2", "-o", "exp"] + app, "FIFO"),
        ("resume-other-command", lambda w: None, r + ["-n", "2", "-o", "exp", "--", "./app", "x"], "another command"),
    ]
    return cases


ARGPARSE_CASES = [
    ("run-hz-word", ["run", "-n", "2", "--hz", "fast", "--", "./app"]),
    ("run-repeat-float", ["run", "-n", "2", "--repeat", "1.5", "--", "./app"]),
    ("detect-top-word", ["detect", "exp", "--top", "many"]),
    ("detect-no-exp", ["detect"]),
    ("psg-no-app", ["psg"]),
    ("unknown-command", ["frobnicate"]),
]

CASES = [("psg-" + c[0], *c[1:]) for c in psg_cases()] + [("detect-" + c[0], *c[1:]) for c in detect_cases()] + \
        [("run-" + c[0], *c[1:]) for c in run_cases()]


def test_corpus_is_large_enough():
    assert len(CASES) + len(ARGPARSE_CASES) + len(SUBPROCESS_CASES) >= 100


@pytest.mark.parametrize("name,setup,argv,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_cleanly(name, setup, argv, fragment, case_dir, capsys):
    setup(case_dir)
    before = snapshot(case_dir.parent)
    code, out, err = run_cli(argv, capsys, case_dir)
    assert_refused(code, err, fragment, before, snapshot(case_dir.parent))


@pytest.mark.parametrize("name,argv", ARGPARSE_CASES, ids=[c[0] for c in ARGPARSE_CASES])
def test_bad_arguments_are_refused_by_the_parser(name, argv, case_dir, capsys):
    before = snapshot(case_dir.parent)
    code, out, err = run_cli(argv, capsys, case_dir)
    assert code == 2 and "Traceback" not in err and "error:" in err
    assert snapshot(case_dir.parent) == before


# ---- as a user starts them: sgcc, and a FIFO through the real entry point --------------------

def _sub(argv, cwd, env=None, timeout=60):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


SUBPROCESS_CASES = [
    ("sgcc-output-is-source", ["sgcc", "-o", "prog.c", "prog.c"], "also an input"),
    ("sgcc-compile-output-is-source", ["sgcc", "-c", "-o", "prog.c", "prog.c"], "also an input"),
    ("sgcc-output-names-source", ["sgcc", "-o", "other.c", "prog.c"], "names a source file"),
    ("sgcc-output-names-header", ["sgcc", "-o", "prog.h", "prog.c"], "names a source file"),
    ("sgcc-output-is-object-input", ["sgcc", "-o", "lib.o", "prog.c", "lib.o"], "also an input"),
    ("sgcxx-output-is-source", ["sgcxx", "-o", "prog.cpp", "prog.cpp"], "also an input"),
    ("sgcc-output-is-a-fifo", ["sgcc", "-c", "-o", "fifo", "prog.c"], "not a regular file"),
    ("sgcc-output-is-a-directory", ["sgcc", "-o", "fifoexp", "prog.c"], "not a regular file"),
    ("scalgraph-psg-fifo", ["scalgraph", "psg", "fifo"], "FIFO"),
    ("sgcc-implied-object-is-a-fifo", ["sgcc", "-c", "other.c"], "the output other.o is a FIFO"),
    ("sgcc-implied-executable-is-a-directory", ["sgcc", "prog.c"], "the output a.out is a directory"),
    ("sgcc-response-file-fifo", ["sgcc", "@fifo", "prog.c"], "FIFO"),
    ("sgcc-response-file-directory", ["sgcc", "@fifoexp", "prog.c"], "directory"),
    ("sgcc-response-file-device", ["sgcc", "@/dev/zero", "prog.c"], "character device"),
    ("sgcc-response-file-unreadable-quote", ["sgcc", "@quote.rsp", "prog.c"], "quote"),
    ("sgcc-response-file-names-itself", ["sgcc", "@self.rsp", "prog.c"], "nested more than"),
    ("sgcc-response-file-output-is-source", ["sgcc", "@out.rsp"], "also an input"),
]


@pytest.mark.parametrize("name,argv,fragment", SUBPROCESS_CASES, ids=[c[0] for c in SUBPROCESS_CASES])
def test_bad_input_as_a_user_starts_it(name, argv, fragment, tmp_path):
    (tmp_path / "prog.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "prog.cpp").write_text("int main() { return 0; }\n")
    (tmp_path / "lib.o").write_bytes(b"\x7fELF not really")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "fifoexp").mkdir()
    os.mkfifo(tmp_path / "fifoexp" / "experiment.json")
    (tmp_path / "other.c").write_text("int other(void) { return 1; }\n")
    os.mkfifo(tmp_path / "other.o")
    (tmp_path / "a.out").mkdir()
    (tmp_path / "quote.rsp").write_text('-O2 "-DNAME=unclosed\n')
    (tmp_path / "self.rsp").write_text("-O2 @self.rsp\n")
    (tmp_path / "out.rsp").write_text("-o prog.c prog.c\n")
    before = snapshot(tmp_path)
    res = _sub([str(BIN / argv[0]), *argv[1:]], tmp_path)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], res.stderr
    assert snapshot(tmp_path) == before


def test_mpicc_pointing_at_sgcc_does_not_start_sgcc_again(tmp_path):
    """`make MPICC=sgcc` / `export MPICC=sgcc`: the wrapper found is checked not to be ourselves, and the
    real MPI wrapper is used; a script that calls sgcc back is stopped at the first re-entry."""
    sgcc = str(BIN / "sgcc")
    (tmp_path / "prog.c").write_text("int main(void) { return 0; }\n")
    res = _sub([sgcc, "-show", "prog.c"], tmp_path, env={"MPICC": sgcc}, timeout=120)
    assert res.returncode == 0 and "prog.c" in res.stdout and "sgcc" not in res.stdout.split()[0], res.stderr
    back = tmp_path / "mympicc"
    back.write_text(f"#!/bin/sh\nexec {sgcc} \"$@\"\n")
    back.chmod(0o755)
    res = _sub([sgcc, "-show", "prog.c"], tmp_path, env={"MPICC": str(back)}, timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_compiler_variable_pointing_at_sgcc_stops_at_once(tmp_path):
    """SCALGRAPH_CC=sgcc makes the compiler sgcc itself: the first re-entry is refused, in one line
    naming the variable kind, and nothing is built."""
    (tmp_path / "prog.c").write_text("int main(void) { return 0; }\n")
    res = _sub([str(BIN / "sgcc"), "-c", "prog.c"], tmp_path, env={"SCALGRAPH_CC": str(BIN / "sgcc")}, timeout=120)
    lines = res.stderr.strip().splitlines()
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert len(lines) == 1 and "SCALGRAPH_CC" in lines[0], res.stderr
    assert sorted(os.listdir(tmp_path)) == ["prog.c"]


def test_control_characters_from_inputs_never_reach_the_terminal(tmp_path, capsys, base):
    """A region name that sets the terminal title and clears the screen is printed escaped."""
    work = tmp_path / "w"
    shutil.copytree(base, work)
    hostile = "evil\x1b]0;pwned\x07\x1b[2J\rname"
    d = json.loads((work / "app.psg.json").read_text())
    d["name"][0] = hostile
    d.pop("hash")
    (work / "app.psg.json").write_text(json.dumps(d))
    code, out, err = run_cli(["psg", "app"], capsys, work)
    assert code == 0 and "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\rname" in out
    code, out, err = run_cli(["psg", "app", "--dot", "-"], capsys, work)
    assert code == 0 and "\x1b" not in out
    # the same name in a file name of an error message stays one escaped line
    os.mkfifo(work / "bad\x1b[2Jname")
    code, out, err = run_cli(["psg", "bad\x1b[2Jname"], capsys, work)
    assert code == 2 and "\x1b" not in err and len(err.strip().splitlines()) == 1


def test_source_lines_only_from_the_source_roots(tmp_path, capsys):
    """A forged PSG naming a file outside the source roots gets no source lines printed."""
    from scalgraph.io.report import source_excerpt
    secret = tmp_path / "secret" / "key.c"
    secret.parent.mkdir()
    secret.write_text("TOP SECRET\n")
    roots = [tmp_path / "src"]
    roots[0].mkdir()
    (roots[0] / "ok.c").write_text("fine line\n")
    assert "TOP SECRET" not in "".join(source_excerpt(str(secret), 1, 1, roots))
    assert "fine line" in "".join(source_excerpt(str(roots[0] / "ok.c"), 1, 1, roots))
    (roots[0] / "link.c").symlink_to(secret)      # a link inside the roots leading out of them
    assert "TOP SECRET" not in "".join(source_excerpt(str(roots[0] / "link.c"), 1, 1, roots))


def test_psg_json_output_replaces_atomically(tmp_path, capsys, base):
    """--json FILE over an existing file: the old content until the new one is complete, and a
    symlink at FILE is replaced, never written through."""
    work = tmp_path / "w"
    shutil.copytree(base, work)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (work / "out.json").symlink_to(victim)
    code, out, err = run_cli(["psg", "app", "--json", "out.json"], capsys, work)
    assert code == 0, err
    assert victim.read_text() == "keep\n" and not (work / "out.json").is_symlink()
    assert json.loads((work / "out.json").read_text())["format"] == "scalgraph-psg"
    assert not [p for p in work.iterdir() if p.name.endswith(".tmp")]


def test_an_unexpected_error_is_one_line_not_a_traceback(monkeypatch, capsys, tmp_path):
    """The last resort: a bug of ours still ends as one line (SCALGRAPH_DEBUG=1 shows the traceback)."""
    from scalgraph.commands import psg as psg_command

    def broken(args):
        raise ValueError("boom\nsecond line")
    monkeypatch.setattr(psg_command, "run", broken)
    code, out, err = run_cli(["psg", "x"], capsys, tmp_path)
    assert code == 70 and err.count("\n") == 1 and "internal error: ValueError: boom" in err
    monkeypatch.setenv("SCALGRAPH_DEBUG", "1")
    with pytest.raises(ValueError):
        cli.main(["psg", "x"])


def test_the_wrappers_last_resort_is_the_same_one_line(monkeypatch, capsys):
    """sgcc shares the command line's last resort (errors.run_reporting): a bug is one line, its
    control characters escaped, exit 70."""
    from scalgraph.static import driver

    def broken(lang, argv):
        raise ValueError("boom\x1b]0;title\x07")
    monkeypatch.setattr(driver, "build", broken)
    monkeypatch.delenv("SCALGRAPH_DEBUG", raising=False)
    monkeypatch.delenv("SCALGRAPH_WRAPPER_ACTIVE", raising=False)
    assert driver.main("c", ["x.c"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sgcc: internal error: ValueError: boom\\x1b]0;title\\x07" in err
    assert "\x1b" not in err and "SCALGRAPH_NO_INSTRUMENT=1" in err
