"""Every `scalgraph` call builds the parser of every command (scalgraph/cli.py), so a command
module's top level must stay light: argparse and small constants, no numpy/scipy/networkx/llvmlite/
pandas (those cost seconds per call; they are imported inside run()).  Checked in a fresh
interpreter, by what is in sys.modules, not by timing."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "scipy", "networkx", "llvmlite", "pandas", "matplotlib", "mpi4py", "otf2")


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_building_the_parser_loads_no_heavy_library():
    loaded = _loaded_after("import scalgraph.cli as cli\n"
                           "assert cli.build_parser().parse_args(['detect', 'EXP']).experiment == 'EXP'")
    assert not loaded & set(HEAVY), f"build_parser() imported {sorted(loaded & set(HEAVY))}"


def test_help_of_every_command_loads_no_heavy_library():
    from scalgraph.cli import COMMANDS
    for name in ["", *COMMANDS]:
        argv = [name, "--help"] if name else ["--help"]
        code = ("import contextlib, io, scalgraph.cli as cli\n"
                "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
                f"    try: cli.main({argv!r})\n"
                "    except SystemExit as e: assert e.code == 0, e.code\n"
                "assert 'usage: scalgraph' in out.getvalue()\n")
        loaded = _loaded_after(code)
        assert not loaded & set(HEAVY), f"scalgraph {name} --help imported {sorted(loaded & set(HEAVY))}"


def test_a_call_imports_only_the_command_it_names():
    code = ("import contextlib, io, sys, scalgraph.cli as cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: cli.main(['trace', '--help'])\n"
            "    except SystemExit as e: assert e.code == 0, e.code\n"
            "print(sorted(m for m in sys.modules if m.startswith('scalgraph.commands.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['scalgraph.commands.trace']", out


def test_help_shows_the_analysis_defaults(capsys):
    """The defaults --help prints come from scalgraph/analysis/defaults.py; the analysis must use the same."""
    import inspect

    from scalgraph.analysis.abnormal import find_abnormal
    from scalgraph.analysis.detect import analyse
    from scalgraph.cli import main
    thd = inspect.signature(find_abnormal).parameters["thd"].default
    share = inspect.signature(analyse).parameters["min_share"].default
    for name in ("detect", "report"):
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"(default {thd})" in text and f"(default {share})" in text, text
