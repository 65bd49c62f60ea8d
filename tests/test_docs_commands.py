"""The commands shown in README.md and docs/user-guide/*.md are run, so that examples that drift from the code
fail CI.

Convention (also stated in docs/user-guide/index.md):
- A fenced block marked ```console is executed.  A line starting with `$ ` is a command (a trailing `\\`
  continues it on the next line; `# ...` is a comment); the lines after it, up to the next `$ ` line, are
  its expected output.  Every shown output line must appear in the real output (stdout and stderr as a
  terminal shows them), in the order shown; lines may be left out anywhere.  Before comparing, runs of
  blanks are collapsed, the sandbox's and the repository's paths are cut to relative ones, and measured
  quantities are masked: every decimal number and every integer followed by a unit (`427 ms`, `15%`,
  `2.9x`) become `#`, so timings may vary but the source lines, ranks, counts and names may not.
  Within a shown line, `...` standing as a word stands for any text (`#1 cg.c:21 ...` only has to start
  the real line); a line that is just `...` marks left-out lines.  A line `[exit N]` says the command exits
  with N (default 0).
- A block preceded by the line `<!-- docs-test requires: PROG ... -->` needs those programs beyond the venv
  (e.g. `mpicc.openmpi`): it runs in its own test, skipped where they are missing (a failure in CI).
- Commands are single programs with arguments (leading `VAR=value` words set the environment); no pipes,
  redirections or `$(...)`: they are run without a shell.
- All pages share one sandbox directory, in this order: README.md, then the guide pages by name.  It holds
  a copy of the repository's `samples/`, and `sgcc`, `scalgraph`, ... are the venv's.  A command already run
  with the same words is not run again (its output is reused), so pages can repeat the README's set-up.
- Other fenced blocks (```sh, ```text, ...) are illustrative: templates for your own project, or output of
  runs too long for a test.  Their `scalgraph` options are still checked against the real parser, as are
  those in inline code, in every page this module covers (README.md, docs/user-guide/, docs/formats.md,
  docs/design.md, docs/how-detection-works.md), and their relative links must point to existing files.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, require_tool

GUIDE = ROOT / "docs" / "user-guide"
EXECUTED = [ROOT / "README.md", *sorted(GUIDE.glob("*.md"))]
CHECKED = [*EXECUTED, *(ROOT / "docs" / n for n in ("formats.md", "design.md", "how-detection-works.md"))]
BIN = pathlib.Path(sys.executable).parent
SHELL_WORDS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1", "&"}
ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
UNIT = r"(?:ms|us|µs|ns|s|%|x|B|KB|MB|GB|KiB|MiB|GiB|Hz|kHz)(?![\w])"
MEASURED = re.compile(rf"-?\d+\.\d+(?:e[-+]?\d+)?\s?(?:{UNIT})?|-?\d+\s?{UNIT}")
EXIT_LINE = re.compile(r"^\[exit (\d+)\]$")
ELLIPSIS = re.compile(r"(?:(?<=\s)|^)\.\.\.(?=\s|$)")      # `...` as a word: any text


@dataclasses.dataclass
class Example:
    page: str
    line: int                      # line number of the `$ ` line in the page
    command: str
    expected: list[str]
    exit_code: int = 0
    requires: tuple[str, ...] = ()  # programs the example needs beyond the venv (e.g. mpicc.openmpi)


def rel(page: pathlib.Path) -> str:
    return str(page.relative_to(ROOT))


REQUIRES = re.compile(r"^<!--\s*docs-test requires:\s*(.*?)\s*-->$")


def requires_before(lines: list[str], fence_line: int) -> tuple[str, ...]:
    """Programs named by a `<!-- docs-test requires: prog ... -->` line right before a fence."""
    m = REQUIRES.match(lines[fence_line - 1].strip()) if fence_line > 0 else None
    return tuple(m.group(1).split()) if m else ()


def fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(info string, line number of the first content line, content lines) of each fenced block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(2), m.group(3), i + 1
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        blocks.append((info, start + 1, lines[start:i]))
        i += 1
    return blocks


def examples(page: pathlib.Path) -> list[Example]:
    found: list[Example] = []
    lines = page.read_text().splitlines()
    for info, first, body in fenced_blocks(page.read_text()):
        if info != "console":
            continue
        needs = requires_before(lines, first - 2)
        current: Example | None = None
        k = 0
        while k < len(body):
            line = body[k]
            if line.startswith("$ "):
                command, start = line[2:], k
                while command.rstrip().endswith("\\") and k + 1 < len(body):
                    k += 1
                    command = command.rstrip()[:-1] + " " + body[k].strip()
                current = Example(rel(page), first + start, command, [], requires=needs)
                found.append(current)
            elif current is not None and line.strip():
                m = EXIT_LINE.match(line.strip())
                if m:
                    current.exit_code = int(m.group(1))
                else:
                    current.expected.append(line)
            k += 1
    return found


def normalise(line: str, cut: list[str]) -> str:
    for prefix in cut:
        line = line.replace(prefix, "")
    return " ".join(MEASURED.sub("#", line).split())


def missing_lines(expected: list[str], actual: str, cut: list[str]) -> list[str]:
    """The shown lines not found in order in the real output (empty when the example holds)."""
    real = [normalise(x, cut) for x in actual.splitlines()]
    pos, missing = 0, []
    for want in expected:
        w = normalise(want, cut)
        if w == "...":
            continue
        pattern = re.compile(".*".join(re.escape(part.strip()) for part in ELLIPSIS.split(w)))
        for j in range(pos, len(real)):
            if pattern.fullmatch(real[j]):
                pos = j + 1
                break
        else:
            missing.append(want)
    return missing


def split_command(command: str) -> tuple[dict[str, str], list[str]]:
    words = shlex.split(command, comments=True)
    bad = [w for w in words if w in SHELL_WORDS or "$(" in w or "`" in w]
    assert not bad, f"console commands run without a shell; {bad} is shell syntax: {command}"
    env = {}
    while words and ENV_WORD.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words, f"no command in: {command}"
    return env, words


class Sandbox:
    """One directory for all pages, with each distinct command run once."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        shutil.copytree(ROOT / "samples", path / "samples")      # a copy: detect shows sources under its cwd only
        self.env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONUNBUFFERED="1",
                        COLUMNS="200")
        self.done: dict[str, subprocess.CompletedProcess] = {}
        self.cut = sorted({f"{path.resolve()}/", f"{path}/", f"{ROOT}/"}, key=len, reverse=True)

    def run(self, ex: Example) -> subprocess.CompletedProcess:
        if ex.command not in self.done:
            extra, words = split_command(ex.command)
            self.done[ex.command] = subprocess.run(words, cwd=self.path, env={**self.env, **extra},
                                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                                   timeout=600)
        return self.done[ex.command]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Sandbox:
    require_tool(importlib.util.find_spec("scalgraph.runtime.shim") is not None, "runtime shim not installed")
    require_tool(importlib.util.find_spec("ziglang") is not None, "no ziglang (pip install ziglang)")
    require_tool((BIN / "mpicc").is_file() or bool(os.environ.get("MPICC")), "no MPI (pip install mpich)")
    return Sandbox(tmp_path_factory.mktemp("docs"))


def check_examples(page: pathlib.Path, sandbox: Sandbox, with_tools: bool) -> None:
    if page != EXECUTED[0]:                       # every page may build on the README's examples
        for ex in examples(EXECUTED[0]):
            if not ex.requires:
                sandbox.run(ex)
    chosen = [ex for ex in examples(page) if bool(ex.requires) == with_tools]
    for ex in chosen:
        for prog in ex.requires:
            require_tool(shutil.which(prog) is not None, f"{prog} not installed (bash scripts/setup.sh as root)")
    failures = []
    for ex in chosen:
        res = sandbox.run(ex)
        where = f"{ex.page}:{ex.line}: $ {ex.command}"
        if res.returncode != ex.exit_code:
            failures.append(f"{where}\n  exit {res.returncode}, the page says {ex.exit_code}\n{res.stdout[-3000:]}")
            continue
        missing = missing_lines(ex.expected, res.stdout, sandbox.cut)
        if missing:
            failures.append(f"{where}\n  not in the output (in this order): {missing}\n  output:\n{res.stdout[-4000:]}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("page", EXECUTED, ids=rel)
def test_console_examples_run_as_shown(page, sandbox):
    check_examples(page, sandbox, with_tools=False)


@pytest.mark.parametrize("page", [p for p in EXECUTED if any(ex.requires for ex in examples(p))], ids=rel)
def test_console_examples_with_other_tools(page, sandbox):
    """Examples marked `<!-- docs-test requires: prog -->` (another MPI, ...): skipped where prog is
    missing, a failure in CI, where scripts/setup.sh installs it."""
    check_examples(page, sandbox, with_tools=True)


def test_pages_have_examples():
    """The README and every command's guide page show something that runs."""
    assert examples(ROOT / "README.md")
    for name in ("compile", "psg", "run", "detect", "trace", "report", "export"):
        assert examples(GUIDE / f"{name}.md"), f"docs/user-guide/{name}.md has no ```console example"


# --- options and links mentioned anywhere in the pages -------------------------------------------------

def parser_options() -> dict[str, set[str]]:
    from scalgraph import cli
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {name: {o for a in p._actions for o in a.option_strings} for name, p in sub.choices.items()}


def scalgraph_mentions(text: str) -> list[tuple[str, list[str]]]:
    """(subcommand, its option words) of every `scalgraph SUB ...` in code blocks and inline code."""
    spans = [re.sub(r"(^|\s)#.*", "", line) for _, _, body in fenced_blocks(text) for line in body]
    spans += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    found = []
    for span in spans:
        for m in re.finditer(r"(?:^|[\s/$(])scalgraph\s+([a-z][\w-]*)((?:[ \t]+[^\s|;&]+)*)", span):
            words = [w.strip("[]()") for w in m.group(2).split()]
            for stop in ("--", "#"):               # the program's own arguments; a comment
                if stop in words:
                    words = words[:words.index(stop)]
            opts = [w.split("=", 1)[0] for w in words if re.match(r"^--?[A-Za-z]", w)]
            found.append((m.group(1), opts))
    return found


@pytest.mark.parametrize("page", CHECKED, ids=rel)
def test_scalgraph_options_exist(page):
    if not page.exists():
        pytest.fail(f"{rel(page)} is missing")
    known = parser_options()
    wrong = []
    for sub, opts in scalgraph_mentions(page.read_text()):
        if sub not in known:
            wrong.append(f"scalgraph {sub}: no such command")
            continue
        wrong += [f"scalgraph {sub} {o}: no such option" for o in opts if o not in known[sub]]
    assert not wrong, f"{rel(page)}: {sorted(set(wrong))}"


def untracked(paths: list[pathlib.Path]) -> set[pathlib.Path]:
    """Those of `paths` git does not track (a file only in this work tree is missing in a fresh clone);
    nothing when this is not a git work tree."""
    if not paths or not (ROOT / ".git").exists() or shutil.which("git") is None:
        return set()
    res = subprocess.run(["git", "ls-files", "--", *map(str, paths)], cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        return set()
    tracked = {(ROOT / line).resolve() for line in res.stdout.splitlines()}
    return {p for p in paths if p.is_file() and p not in tracked}


@pytest.mark.parametrize("page", CHECKED, ids=rel)
def test_relative_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken, targets = [], {}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
        else:
            targets[path] = target
    broken += [f"{targets[p]} (not in git)" for p in untracked(list(targets))]
    assert not broken, f"{rel(page)} links to missing files: {broken}"


def test_matching_rules():
    """The comparison itself: measured numbers are masked, source lines and ranks are not."""
    cut = ["/tmp/x/"]
    real = "scalgraph run: 3 runs ok in /tmp/x/e\n#1 /tmp/x/samples/cg/cg.c:21-22  in f  rank 4\n   cost 421 ms = 15.1% of it"
    assert missing_lines(["#1 samples/cg/cg.c:21-22 in f rank 4", "cost 9 ms = 2.0% of it"], real, cut) == []
    assert missing_lines(["#1 samples/cg/cg.c:23-24 in f rank 4"], real, cut)       # another line
    assert missing_lines(["#1 samples/cg/cg.c:21-22 in f rank 5"], real, cut)       # another rank
    assert missing_lines(["cost 9 ms ...", "#1 samples/cg/cg.c:21-22 ..."], real, cut)   # order
    assert missing_lines(["#1 samples/cg/cg.c:21-22 ..."], real, cut) == []
    assert missing_lines(["... in f rank 4", "... of ..."], real, cut) == []
    assert missing_lines(["... in f rank 5 ..."], real, cut)
    assert missing_lines(["#1 ... in f ...", "cost ... of it"], real, cut) == []
    assert missing_lines(["scalgraph run: [##....] # runs ok ..."], real, cut)      # dots inside a word
    assert split_command("A=1 B='x y' sgcc -o cg cg.c   # note") == ({"A": "1", "B": "x y"}, ["sgcc", "-o", "cg", "cg.c"])
    with pytest.raises(AssertionError):
        split_command("scalgraph detect e | head")
