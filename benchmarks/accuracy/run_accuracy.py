"""Accuracy of scalgraph on real MPI programs: does it name a planted scaling problem, and does it stay
quiet on the untouched program?

For every program of the manifest (benchmarks/accuracy/programs.toml, schema in README.md here) the
runner copies the fetched sources into a scratch directory (the fetched folder is never modified),
plants a fixed CPU loop on one rank inside the main loop of one copy, builds both copies with the
compile wrappers, and per repetition and mode runs `scalgraph run -n 2,4,8` (with `--trace` for the
trace modes), `scalgraph detect --json` and, in the `trace` mode, `scalgraph trace --json` on the
largest scale's run.  A planted run is a top-1 (top-3) hit when the first (one of the first three)
root causes lies on the planted loop; a control run (no plant) passes when no root cause is reported
(in the trace mode: when the verdict of `scalgraph trace`, its top-level root_causes, is empty).

  .venv/bin/python benchmarks/accuracy/run_accuracy.py --sources /work/.mirror
  .venv/bin/python benchmarks/accuracy/run_accuracy.py --sources DIR --programs hpccg --modes profile --repeat 1
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scalgraph.errors import UserError  # noqa: E402
from scalgraph.runtime.placeholders import placeholders_in  # noqa: E402

MODES = ("profile", "trace-detect", "trace")
LANGUAGES = ("c", "c++", "fortran")
BUILD_NAMES = ("sgcc", "sgcxx", "sgfort", "jobs")
DEFAULT_TIMEOUT = 600.0
BUILD_TIMEOUT = 3600.0
FORTRAN_SUFFIXES = (".f", ".for", ".f77", ".ftn", ".f90", ".f95", ".f03", ".f08")
FIXED_FORM_SUFFIXES = (".f", ".for", ".f77", ".ftn")
PLANTED, CONTROL = "planted", "control"


class ManifestError(UserError):
    pass


# ---------------------------------------------------------------------------------------------- manifest

@dataclasses.dataclass(frozen=True)
class Plant:
    file: str
    after_line: int
    rank: int
    iterations: int


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    family: str
    repo: str
    commit: str
    language: str
    subdir: str
    build: tuple
    executable: str
    args: tuple
    timeout: float | None = None
    plant: Plant | None = None
    weak: bool = False          # scaling = "weak": the arguments give a per-rank size (detect --weak)


REQUIRED = {"name": str, "family": str, "repo": str, "commit": str, "language": str, "subdir": str,
            "build": list, "executable": str, "args": list}
OPTIONAL = {"timeout": (int, float), "plant": dict, "scaling": str}
PLANT_KEYS = {"file": str, "after_line": int, "rank": int, "iterations": int}


def load_manifest(path: pathlib.Path) -> list[Program]:
    """All programs of a manifest file, each checked; a ManifestError names the file, entry and field."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise ManifestError(f"{path}: cannot read the manifest ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{path}: not valid TOML ({e})") from None
    extra = set(data) - {"program"}
    if extra:
        raise ManifestError(f"{path}: unknown top-level key(s) {', '.join(sorted(extra))}; entries are [[program]] tables")
    entries = data.get("program", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ManifestError(f"{path}: 'program' must be an array of tables ([[program]])")
    programs = [parse_program(e, f"{path.name}: program {i + 1}") for i, e in enumerate(entries)]
    seen: set[str] = set()
    for prog in programs:
        if prog.name in seen:
            raise ManifestError(f"{path.name}: program name {prog.name!r} is used twice")
        seen.add(prog.name)
    return programs


def parse_program(e: dict, where: str) -> Program:
    if isinstance(e.get("name"), str):
        where = f"{where} ({e['name']!r})"
    check_keys(e, REQUIRED, OPTIONAL, where)
    name, repo, commit = e["name"], e["repo"], e["commit"]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ManifestError(f"{where}: name must be letters, digits, '_', '.', '-' (it is a folder name), got {name!r}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", repo):
        raise ManifestError(f"{where}: repo must be GitHub's owner/name, got {repo!r}")
    if not re.fullmatch(r"[0-9a-fA-F]{40}", commit):
        raise ManifestError(f"{where}: commit must be 40 hex digits, got {commit!r}")
    if e["language"] not in LANGUAGES:
        raise ManifestError(f"{where}: language must be one of {', '.join(LANGUAGES)}, got {e['language']!r}")
    check_relative(e["subdir"], "subdir", where, allow_empty=True)
    check_relative(e["executable"], "executable", where)
    build = check_build(e["build"], where)
    args = check_args(e["args"], where)
    timeout = e.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or timeout <= 0):
        raise ManifestError(f"{where}: timeout must be a positive number of seconds, got {timeout!r}")
    plant = parse_plant(e["plant"], f"{where}: plant") if "plant" in e else None
    scaling = e.get("scaling", "strong")
    if scaling not in ("strong", "weak"):
        raise ManifestError(f"{where}: scaling must be \"strong\" or \"weak\", got {scaling!r}")
    return Program(name, e["family"], repo, commit.lower(), e["language"], e["subdir"], build, e["executable"],
                   args, float(timeout) if timeout is not None else None, plant, scaling == "weak")


def check_keys(e: dict, required: dict, optional: dict, where: str) -> None:
    missing = [k for k in required if k not in e]
    if missing:
        raise ManifestError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(e) - set(required) - set(optional))
    if unknown:
        raise ManifestError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join([*required, *optional])})")
    for k, v in e.items():
        want = required.get(k) or optional.get(k)
        if not isinstance(v, want) or (isinstance(v, bool) and want in (int, (int, float))):
            kind = want.__name__ if isinstance(want, type) else "number"
            raise ManifestError(f"{where}: {k} must be a {kind}, got {v!r}")


def check_relative(text: str, key: str, where: str, allow_empty: bool = False) -> None:
    if not text and allow_empty:
        return
    parts = pathlib.PurePosixPath(text).parts
    if not text or text.startswith("/") or ".." in parts:
        raise ManifestError(f"{where}: {key} must be a path relative to the repository without '..', got {text!r}")


def check_build(build: list, where: str) -> tuple:
    if not build or not all(isinstance(c, list) and c and all(isinstance(w, str) for w in c) for c in build):
        raise ManifestError(f"{where}: build must be a non-empty list of commands, each a non-empty list of strings")
    for cmd in build:
        for word in cmd:
            for name in re.findall(r"\{([^{}]*)\}", word):
                if name not in BUILD_NAMES:
                    raise ManifestError(f"{where}: build word {word!r}: unknown placeholder {{{name}}} "
                                        f"(known: {' '.join('{%s}' % n for n in BUILD_NAMES)})")
    return tuple(tuple(c) for c in build)


def check_args(args: list, where: str) -> tuple:
    if not all(isinstance(a, str) for a in args):
        raise ManifestError(f"{where}: args must be a list of strings, got {args!r}")
    try:
        placeholders_in(args)
    except UserError as err:
        raise ManifestError(f"{where}: {err}") from None
    return tuple(args)


def parse_plant(e: dict, where: str) -> Plant:
    check_keys(e, PLANT_KEYS, {}, where)
    check_relative(e["file"], "file", where)
    if e["after_line"] < 1 or e["rank"] < 0 or e["iterations"] < 1:
        raise ManifestError(f"{where}: after_line and iterations must be at least 1 and rank at least 0")
    return Plant(e["file"], e["after_line"], e["rank"], e["iterations"])


# ---------------------------------------------------------------------------------------------- sources

def find_mirror(sources: pathlib.Path, repo: str) -> pathlib.Path | None:
    """The bare git directory of repo in a folder of mirrors named owner+name* (our fetch tool's layout:
    sources/owner+name/repo, or the bare directory itself)."""
    key = repo.replace("/", "+").lower()
    names = [d for d in sorted(sources.iterdir()) if d.is_dir() and d.name.lower().startswith(key)]
    exact = [d for d in names if d.name.lower() in (key, key + ".git")]
    for d in exact or names:
        for cand in (d, *sorted(c for c in d.iterdir() if c.is_dir())):
            if (cand / "HEAD").is_file() and (cand / "objects").is_dir():
                return cand
    return None


def fetch_sources(prog: Program, sources: pathlib.Path, dest: pathlib.Path) -> str:
    """Copy the program's sources into dest (which must not exist); returns where they came from."""
    plain = sources / prog.name
    if plain.is_dir():
        shutil.copytree(plain, dest, symlinks=True)
        return str(plain)
    mirror = find_mirror(sources, prog.repo) if sources.is_dir() else None
    if mirror is None:
        raise UserError(f"sources not found: neither {plain}/ nor a mirror {prog.repo.replace('/', '+')}* in {sources}")
    git = ["git", f"--git-dir={mirror}"]
    if subprocess.run([*git, "cat-file", "-e", f"{prog.commit}^{{commit}}"], capture_output=True).returncode:
        raise UserError(f"commit {prog.commit} is not in the mirror {mirror}")
    dest.mkdir(parents=True)
    archive = subprocess.Popen([*git, "archive", "--format=tar", prog.commit], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    err = archive.stderr.read().decode(errors="replace")
    if archive.wait() != 0 or untar.returncode != 0:
        raise UserError(f"extracting {prog.commit[:12]} from {mirror} failed: "
                        f"{(err + untar.stderr.decode(errors='replace')).strip()[:200]}")
    return f"{mirror}@{prog.commit[:12]}"


# ---------------------------------------------------------------------------------------------- planting

def is_fortran(path: str) -> bool:
    return pathlib.PurePosixPath(path).suffix.lower() in FORTRAN_SUFFIXES


def is_fixed_form(path: str) -> bool:
    return pathlib.PurePosixPath(path).suffix.lower() in FIXED_FORM_SUFFIXES


def c_plant(rank: int, iterations: int, indent: str) -> tuple[list[str], int]:
    """The planted C/C++ block, and the index of its `for` line."""
    return [f"{indent}{{ int sg_plant_rank_; MPI_Comm_rank(MPI_COMM_WORLD, &sg_plant_rank_);",
            f"{indent}  if (sg_plant_rank_ == {rank}) {{ volatile double sg_plant_x_ = 0.0;",
            f"{indent}    for (long sg_plant_i_ = 0; sg_plant_i_ < {iterations}L; sg_plant_i_++) "
            "sg_plant_x_ += 1e-9 * (double)sg_plant_i_; } }"], 2


def fortran_plant(rank: int, iterations: int, indent: str, fixed: bool) -> tuple[list[str], int]:
    """The planted Fortran 2008 block construct (about 1.1 ns per iteration, against 4.2 ns for the
    C block's volatile sum), and the index of its `do` line.  Fixed form: every
    line starts in column 7 and stays within column 72."""
    body = [(0, "block"),
            (1, "integer :: sg_plant_rank_, sg_plant_ierr_"),
            (1, "integer(8) :: sg_plant_i_"),
            (1, "double precision :: sg_plant_x_"),
            (1, "call MPI_Comm_rank(MPI_COMM_WORLD, sg_plant_rank_, sg_plant_ierr_)"),
            (1, f"if (sg_plant_rank_ == {rank}) then"),
            (2, "sg_plant_x_ = 0.0d0"),
            (2, f"do sg_plant_i_ = 1_8, {iterations}_8"),
            (3, "sg_plant_x_ = sg_plant_x_ + 1.0d-9 * dble(sg_plant_i_)"),
            (2, "end do"),
            # flang-19 ignores volatile here and deletes a loop whose result nobody reads: a use
            # that never prints (the sum is positive) keeps the work
            (2, "if (sg_plant_x_ < 0.0d0) print *, sg_plant_x_"),
            (1, "end if"),
            (0, "end block")]
    if fixed:
        return [" " * 6 + text for _, text in body], 7
    return [indent + "  " * depth + text for depth, text in body], 7


def plant_block(path: str, plant: Plant, indent: str) -> tuple[list[str], int]:
    if is_fortran(path):
        return fortran_plant(plant.rank, plant.iterations, indent, is_fixed_form(path))
    return c_plant(plant.rank, plant.iterations, indent)


def insert_plant(src_root: pathlib.Path, plant: Plant) -> int:
    """Insert the planted loop after plant.after_line of src_root/plant.file; returns the line number
    of its `for`/`do` in the modified file (the answer the detector should give)."""
    path = src_root / plant.file
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")      # line endings kept as they are
    except OSError as e:
        raise UserError(f"plant: cannot read {plant.file} ({e.strerror})") from None
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)      # lines end at \n only (str.splitlines also splits at \f)
    if plant.after_line > len(lines):
        raise UserError(f"plant: {plant.file} has {len(lines)} lines, after_line is {plant.after_line}")
    anchor = lines[plant.after_line - 1]
    eol = "\r\n" if anchor.endswith("\r\n") else "\n"
    if not anchor.endswith(("\n", "\r")):
        lines[plant.after_line - 1] = anchor + eol
    indent = re.match(r"[ \t]*", anchor).group(0)
    block, at = plant_block(plant.file, plant, indent)
    lines[plant.after_line:plant.after_line] = [b + eol for b in block]
    path.write_bytes("".join(lines).encode("utf-8", "surrogateescape"))
    return plant.after_line + 1 + at


# ---------------------------------------------------------------------------------------------- hits

@dataclasses.dataclass(frozen=True)
class Cause:
    file: str
    line: int
    line_last: int
    label: str
    cost: float = 0.0        # seconds: detect's `cost`, trace's verdict `seconds` (the delay cost that counts)


def is_hit(cause: Cause, file: str, line: int) -> bool:
    """Same file name, and the planted line within the cause's lines."""
    return (pathlib.PurePath(cause.file).name == pathlib.PurePath(file).name
            and cause.line <= line <= max(cause.line, cause.line_last))


def hit_rank(causes: list[Cause], file: str, line: int) -> int | None:
    """0-based position of the first cause on the planted line, or None."""
    return next((k for k, c in enumerate(causes) if is_hit(c, file, line)), None)


def detect_causes(report: dict) -> list[Cause]:
    """`scalgraph detect --json`: root_causes[k] with file, line, line_last, location."""
    return [Cause(str(c.get("file") or ""), int(c.get("line") or 0), int(c.get("line_last") or c.get("line") or 0),
                  str(c.get("location") or f"{c.get('file')}:{c.get('line')}"), float(c.get("cost") or 0.0))
            for c in report.get("root_causes", [])]


def trace_causes(report: dict) -> list[Cause]:
    """`scalgraph trace --json`: its verdict, the top-level root_causes[k] (computation delays that are
    root causes naming lines, ranked by the delay cost that counts; docs/trace-json.md), not the delay
    table delay.root_causes, which lists every call path that made anybody wait.  Uses the entry's
    file, line and line_last fields when present, else the file:line in its `where` string."""
    out = []
    causes = report.get("root_causes")
    if not isinstance(causes, list):
        raise ValueError("no top-level root_causes list (the verdict) in the scalgraph trace report")
    for c in causes:
        file, line, last = c.get("file"), c.get("line"), c.get("line_last")
        if not file or not line:
            m = re.match(r"\s*(.+?):(\d+)(?:-(\d+))?(?:\s|$)", str(c.get("where") or ""))
            file, line, last = (m.group(1), int(m.group(2)), int(m.group(3) or m.group(2))) if m else ("", 0, 0)
        names = c.get("callpaths") or [c.get("callpath", "")]
        label = f"{' '.join(map(str, names))} {c.get('where', '')}".strip()
        out.append(Cause(str(file), int(line), int(last or line), label, float(c.get("seconds") or 0.0)))
    return out


# ---------------------------------------------------------------------------------------------- running

@dataclasses.dataclass
class Tools:
    sgcc: str
    sgcxx: str
    sgfort: str
    scalgraph: list

    @classmethod
    def find(cls) -> "Tools":
        bin_dir = pathlib.Path(sys.executable).parent
        found = {}
        for name in ("sgcc", "sgcxx", "sgfort"):
            p = bin_dir / name
            found[name] = str(p) if p.is_file() else shutil.which(name)
            if not found[name]:
                raise UserError(f"{name} not found beside {sys.executable} or on PATH; install scalgraph (pip install -e .)")
        return cls(found["sgcc"], found["sgcxx"], found["sgfort"], [sys.executable, "-m", "scalgraph.cli"])


def build_command(cmd: tuple, tools: Tools) -> list[str]:
    values = {"sgcc": tools.sgcc, "sgcxx": tools.sgcxx, "sgfort": tools.sgfort, "jobs": str(os.cpu_count() or 1)}
    return [re.sub(r"\{(sgcc|sgcxx|sgfort|jobs)\}", lambda m: values[m.group(1)], w) for w in cmd]


def last_lines(text: str) -> str:
    """The last line of a tool's output that says what went wrong (an error line if there is one)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("$ ")]
    errors = [ln for ln in lines if re.search(r"\berror\b|failed|fatal|not found|undefined", ln, re.I)]
    return ((errors or lines or [""])[-1])[:240]


def build(prog: Program, src: pathlib.Path, tools: Tools, log: pathlib.Path) -> pathlib.Path:
    """Run the build commands in src/subdir, writing their output to log; the executable, or UserError."""
    where = src / prog.subdir
    if not where.is_dir():
        raise UserError(f"build: subdir {prog.subdir!r} does not exist in the sources")
    with open(log, "w") as out:
        for cmd in prog.build:
            argv = build_command(cmd, tools)
            out.write(f"$ {' '.join(argv)}\n")
            out.flush()
            try:
                res = subprocess.run(argv, cwd=where, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT,
                                     stdin=subprocess.DEVNULL)
            except FileNotFoundError:
                raise UserError(f"build: {argv[0]} not found") from None
            except subprocess.TimeoutExpired:
                raise UserError(f"build: {' '.join(cmd)} took more than {BUILD_TIMEOUT:g} s") from None
            if res.returncode:
                raise UserError(f"build: {' '.join(cmd)} exited {res.returncode}: {last_lines(log.read_text())} (log: {log})")
    exe = where / prog.executable
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise UserError(f"build: finished, but {prog.executable} is not an executable in {prog.subdir or '.'}")
    return exe


def scalgraph(tools: Tools, args: list, cwd: pathlib.Path, timeout: float) -> subprocess.CompletedProcess:
    """One scalgraph command.  Past the timeout it gets SIGTERM first: `scalgraph run` then stops the
    ranks it started (SIGKILL would leave them running)."""
    proc = subprocess.Popen([*tools.scalgraph, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        return subprocess.CompletedProcess(args, -1, "", f"scalgraph {args[0]} took more than {timeout:g} s")
    except BaseException:
        proc.terminate()
        proc.wait()
        raise


@dataclasses.dataclass
class Setup:
    tools: Tools
    scales: list
    timeout: float | None
    run_repeat: int = 1                    # `scalgraph run --repeat K`: the median run, rank by rank


@dataclasses.dataclass(frozen=True)
class Built:
    exe: pathlib.Path                      # the executable
    rundir: pathlib.Path                   # where it is started: its build directory (src/subdir)
    target: tuple[str, int] | None         # planted (file, line of the for/do), None for the control


def record(setup: Setup, prog: Program, built: Built, exp: pathlib.Path, traced: bool) -> str | None:
    """`scalgraph run` into exp, started in the build directory (programs read their inputs from the
    working directory); None when every run is ok, else the error."""
    per_run = setup.timeout or prog.timeout or DEFAULT_TIMEOUT
    cmd = ["run", "-n", ",".join(map(str, setup.scales)), "--timeout", f"{per_run:g}", "-o", str(exp)]
    cmd += ["--trace"] if traced else []
    cmd += ["--repeat", str(setup.run_repeat)] if setup.run_repeat > 1 else []
    res = scalgraph(setup.tools, [*cmd, "--", str(built.exe), *prog.args], built.rundir,
                    per_run * len(setup.scales) * setup.run_repeat + 300)
    if res.returncode != 0:
        return f"scalgraph run: {last_lines(res.stderr)}"
    return None


def analyse(setup: Setup, exp: pathlib.Path, mode: str, weak: bool = False) -> tuple[list[Cause], str | None]:
    """The ranked causes of one recorded experiment in one mode, or the error (`weak`: detect --weak,
    as a user of a weak-scaling program runs it)."""
    if mode == "trace":
        run_dir = exp / f"scale-{max(setup.scales)}" / "rep-0"
        res = scalgraph(setup.tools, ["trace", "--json", str(run_dir)], exp, 3600)
        parse = trace_causes
    else:
        res = scalgraph(setup.tools, ["detect", "--json", *(["--weak"] if weak else []), str(exp)], exp, 3600)
        parse = detect_causes
    if res.returncode != 0:
        return [], f"scalgraph {'trace' if mode == 'trace' else 'detect'}: exit {res.returncode}: {last_lines(res.stderr)}"
    try:
        return parse(json.loads(res.stdout)), None
    except (json.JSONDecodeError, TypeError, ValueError, AttributeError) as e:
        return [], f"unreadable JSON from scalgraph ({e})"


def outcome(variant: str, mode: str, rep: int, causes: list[Cause], error: str | None,
            target: tuple[str, int] | None) -> dict:
    entry = {"variant": variant, "mode": mode, "rep": rep, "status": "failed" if error else "ok",
             "causes": [dataclasses.asdict(c) for c in causes[:5]], "n_causes": len(causes)}
    if error:
        entry["error"] = error
    elif variant == PLANTED and target:
        entry["hit_rank"] = hit_rank(causes, *target)
    else:
        entry["passed"] = not causes
    return entry


def run_variant(setup: Setup, prog: Program, built: Built, work: pathlib.Path, variant: str, modes: list,
                rep: int) -> list[dict]:
    """One repetition of one build: a profile experiment and/or a traced one, analysed in every mode."""
    out = []
    for traced, group in ((False, [m for m in modes if m == "profile"]),
                          (True, [m for m in modes if m != "profile"])):
        if not group:
            continue
        exp = work / f"exp-{variant}-{'trace' if traced else 'profile'}-{rep}"
        error = record(setup, prog, built, exp, traced)
        for mode in group:
            causes, err = ([], error) if error else analyse(setup, exp, mode, prog.weak)
            entry = outcome(variant, mode, rep, causes, err, built.target)
            out.append(entry)
            note(f"{prog.name}: {variant} {mode} rep {rep + 1}: {describe(entry)}")
    return out


def describe(entry: dict) -> str:
    if entry["status"] != "ok":
        return f"FAILED ({entry['error']})"
    top = entry["causes"][0]["label"] if entry["causes"] else "no root cause"
    if "hit_rank" in entry:
        k = entry["hit_rank"]
        return (f"hit at #{k + 1}" if k is not None else "miss") + f"; top: {top}"
    return ("pass" if entry["passed"] else f"{entry['n_causes']} root cause(s)") + f"; top: {top}"


def prepare(prog: Program, setup: Setup, sources: pathlib.Path, work: pathlib.Path, variant: str) -> Built:
    """Sources copied into work/variant/src (and planted), then built."""
    src = work / variant / "src"
    fetch_sources(prog, sources, src)
    target = None
    if variant == PLANTED:
        if prog.plant.rank >= min(setup.scales):
            raise UserError(f"plant rank {prog.plant.rank} does not exist at p={min(setup.scales)}")
        target = (prog.plant.file, insert_plant(src, prog.plant))
    exe = build(prog, src, setup.tools, work / variant / "build.log")
    return Built(exe, src / prog.subdir, target)


def evaluate(prog: Program, setup: Setup, sources: pathlib.Path, modes: list, repeat: int, keep: bool) -> dict:
    """Everything for one program; failures are recorded in the result, never raised."""
    result = {"name": prog.name, "family": prog.family, "repo": prog.repo, "commit": prog.commit,
              "status": "ok", "errors": [], "runs": []}
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"sg-accuracy-{prog.name}-"))
    result["scratch"] = str(work)
    start = time.monotonic()
    try:
        builds = {}
        for variant in ([PLANTED] if prog.plant else []) + [CONTROL]:
            note(f"{prog.name}: preparing the {variant} build in {work / variant}")
            try:
                builds[variant] = prepare(prog, setup, sources, work, variant)
            except UserError as e:
                result["errors"].append(f"{variant}: {e}")
                result["status"] = "build failed"
                note(f"{prog.name}: {variant}: {e}")
        if PLANTED in builds:
            result["plant"] = {**dataclasses.asdict(prog.plant), "line": builds[PLANTED].target[1]}
        for rep in range(repeat):
            for variant, built in builds.items():
                result["runs"] += run_variant(setup, prog, built, work, variant, modes, rep)
    finally:
        result["seconds"] = round(time.monotonic() - start, 1)
        result["kept"] = keep
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    result["summary"] = summarise(result["runs"], modes, repeat)
    return result


def summarise(runs: list[dict], modes: list, repeat: int) -> dict:
    out = {}
    for mode in modes:
        planted = [r for r in runs if r["mode"] == mode and r["variant"] == PLANTED]
        control = [r for r in runs if r["mode"] == mode and r["variant"] == CONTROL]
        ok = [r for r in planted if r["status"] == "ok"]
        out[mode] = {"top1": sum(r["hit_rank"] == 0 for r in ok),
                     "top3": sum(r["hit_rank"] is not None and r["hit_rank"] < 3 for r in ok),
                     "planted_ok": len(ok), "planted_failed": len(planted) - len(ok),
                     "control_pass": sum(r.get("passed", False) for r in control if r["status"] == "ok"),
                     "control_ok": sum(r["status"] == "ok" for r in control),
                     "control_failed": sum(r["status"] != "ok" for r in control), "repeat": repeat}
    return out


# ---------------------------------------------------------------------------------------------- output

def table(results: list[dict], modes: list, repeat: int) -> str:
    """Per program and mode: hits / completed planted runs, control passes / completed control runs."""
    rows = [f"{repeat} repetition(s) per program, variant and mode; a cell is hits / runs that completed",
            f"{'program':<14} {'mode':<13} {'top-1':>7} {'top-3':>7} {'control':>8}  notes"]
    for r in results:
        for mode in modes:
            rows.append(row(r["name"], mode, r["summary"][mode], "plant" in r))
        rows += [f"{r['name']:<14} {'':<13} {r['status'].upper()}: {err}" for err in r["errors"]]
        failures = sorted({run["error"] for run in r["runs"] if run["status"] != "ok"})
        rows += [f"{r['name']:<14} {'':<13} RUN FAILED: {err}" for err in failures[:3]]
    if len(results) > 1:
        for mode in modes:
            total = {k: sum(r["summary"][mode][k] for r in results) for k in results[0]["summary"][mode]}
            rows.append(row("all", mode, total, any("plant" in r for r in results)))
    return "\n".join(rows)


def row(name: str, mode: str, s: dict, planted: bool) -> str:
    top1 = f"{s['top1']}/{s['planted_ok']}" if planted else "-"
    top3 = f"{s['top3']}/{s['planted_ok']}" if planted else "-"
    ctrl = f"{s['control_pass']}/{s['control_ok']}" if s["control_ok"] or s["control_failed"] else "-"
    notes = [f"{s[k]} {what} run(s) failed" for k, what in (("planted_failed", "planted"), ("control_failed", "control"))
             if s[k]]
    return f"{name:<14} {mode:<13} {top1:>7} {top3:>7} {ctrl:>8}  {', '.join(notes)}".rstrip()


def note(text: str) -> None:
    print(f"accuracy: {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- main

def parse_list(text: str, what: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise UserError(f"{what}: give a comma-separated list")
    return items


def parse_scales(text: str) -> list[int]:
    try:
        scales = sorted({int(s) for s in parse_list(text, "--scales")})
    except ValueError:
        raise UserError(f"--scales {text!r}: give whole numbers separated by commas, e.g. 2,4,8") from None
    if not scales or scales[0] < 1:
        raise UserError(f"--scales {text!r}: give process counts of 1 or more")
    return scales


def select(programs: list[Program], wanted: str | None) -> list[Program]:
    if not wanted:
        return programs
    names = parse_list(wanted, "--programs")
    known = {p.name: p for p in programs}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(f"--programs: unknown {', '.join(unknown)}; the manifest has {', '.join(known) or 'none'}")
    return [known[n] for n in names]


def varied_plant(prog: Program, rank: int | None, size: float) -> Program:
    """The program with its plant moved to `rank` and its iterations scaled by `size` (the manifest's
    plant is one choice among many: a detector must not depend on rank 1 or on the plant's size)."""
    if size <= 0 or (rank is not None and rank < 0):
        raise UserError("--plant-size must be positive and --plant-rank at least 0")
    if prog.plant is None:
        return prog
    plant = dataclasses.replace(prog.plant, rank=prog.plant.rank if rank is None else rank,
                                iterations=max(1, round(prog.plant.iterations * size)))
    return dataclasses.replace(prog, plant=plant)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="Run scalgraph on real MPI programs with a planted delay and report "
                                 "how often the planted loop is the top-1 / top-3 root cause, plus un-planted controls.")
    ap.add_argument("--sources", required=True, metavar="DIR",
                    help="fetched sources: DIR/<name>/ plain source trees, or bare git mirrors DIR/owner+repo*")
    ap.add_argument("--manifest", default=str(HERE / "programs.toml"), metavar="FILE",
                    help="programs to run (default %(default)s; schema in README.md beside it)")
    ap.add_argument("--programs", metavar="A,B", help="only these programs (manifest names)")
    ap.add_argument("--modes", default=",".join(MODES), metavar="M,M",
                    help="profile (detect on profiles), trace-detect (detect on a --trace experiment), "
                         "trace (scalgraph trace on the largest scale); default %(default)s")
    ap.add_argument("--repeat", type=int, default=3, metavar="N", help="repetitions per program and mode (default 3)")
    ap.add_argument("--run-repeat", type=int, default=1, metavar="K",
                    help="runs per scale in each `scalgraph run` (--repeat K: detect takes the median run, rank by "
                         "rank, as the detect guide advises on a shared machine; default 1)")
    ap.add_argument("--scales", default="2,4,8", metavar="P,P", help="process counts (default %(default)s; one scale, e.g. 4, checks what a single traced run finds)")
    ap.add_argument("--timeout", type=float, default=None, metavar="S",
                    help=f"seconds per scalgraph run per scale (default: the manifest's, else {DEFAULT_TIMEOUT:g})")
    ap.add_argument("--plant-rank", type=int, default=None, metavar="R",
                    help="plant on rank R instead of the manifest's (checks that the rank is not what is found)")
    ap.add_argument("--plant-size", type=float, default=1.0, metavar="F",
                    help="F x the manifest's planted iterations (default 1; e.g. 0.5 for a plant half as large)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directories (printed) for inspection")
    ap.add_argument("--json-out", metavar="FILE", help="write every result as JSON to FILE")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        modes = parse_list(args.modes, "--modes")
        bad = [m for m in modes if m not in MODES]
        if bad:
            raise UserError(f"--modes: unknown {', '.join(bad)} (known: {', '.join(MODES)})")
        if args.repeat < 1 or args.run_repeat < 1 or (args.timeout is not None and args.timeout <= 0):
            raise UserError("--repeat and --run-repeat must be at least 1 and --timeout positive")
        sources = pathlib.Path(args.sources)
        if not sources.is_dir():
            raise UserError(f"--sources {sources}: no such directory")
        if args.json_out and not pathlib.Path(args.json_out).resolve().parent.is_dir():
            raise UserError(f"--json-out {args.json_out}: its directory does not exist")
        programs = [varied_plant(p, args.plant_rank, args.plant_size)
                    for p in select(load_manifest(pathlib.Path(args.manifest)), args.programs)]
        setup = Setup(Tools.find(), parse_scales(args.scales), args.timeout, args.run_repeat)
    except UserError as e:
        print(f"run_accuracy: {e}", file=sys.stderr)
        return 2
    results = []
    try:
        for prog in programs:
            results.append(evaluate(prog, setup, sources, modes, args.repeat, args.keep))
            if args.json_out:
                write_json(pathlib.Path(args.json_out), setup, modes, args.repeat, results)
    except KeyboardInterrupt:
        print(table(results, modes, args.repeat))
        print(f"run_accuracy: interrupted; {len(results)} of {len(programs)} programs done", file=sys.stderr)
        return 130
    print(table(results, modes, args.repeat))
    if args.keep:
        for r in results:
            print(f"scratch of {r['name']}: {r['scratch']}")
    failed = any(r["status"] != "ok" or any(run["status"] != "ok" for run in r["runs"]) for r in results)
    return 1 if failed else 0


def write_json(path: pathlib.Path, setup: Setup, modes: list, repeat: int, results: list) -> None:
    data = {"scales": setup.scales, "modes": modes, "repeat": repeat, "programs": results}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
