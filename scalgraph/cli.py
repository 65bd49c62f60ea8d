"""Command line: argument parsing only.  Each subcommand lives in scalgraph/commands/<name>.py with
`add_arguments(parser)` and `run(args) -> int`; they are imported lazily so `scalgraph --help`
needs no compiler, MPI or LLVM."""
from __future__ import annotations

import argparse
import importlib
import sys

from scalgraph.errors import run_reporting

# name -> one-line help.  Module scalgraph.commands.<name> implements it.
COMMANDS = {
    "psg": "print the Program Structure Graph of an executable built with sgcc/sgcxx/sgfort",
    "run": "run an instrumented program at several process counts into an experiment directory",
    "detect": "find the source lines that cause scaling loss in an experiment",
    "trace": "analyse an event trace: wait states, delay costs, critical path",
    "export": "write an experiment or a trace for Hatchet/Thicket, Extra-P, Cube, OTF2 or Perfetto",
    "report": "write the analysis of an experiment or a trace as one self-contained HTML page",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only`, the arguments of that one command alone (the others keep their
    one-line help), so a call imports one command module, not all of them."""
    p = argparse.ArgumentParser(prog="scalgraph", description="Find the source lines that make an MPI program "
                                "stop scaling, and why. Build with sgcc/sgcxx/sgfort, then: scalgraph run -n 2,4,8 -- "
                                "./app; scalgraph detect EXPERIMENT.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        mod = _command_module(name) if only is None or name == only else None
        if mod is not None:
            mod.add_arguments(sp)
    return p


def _command_module(name: str):
    try:
        return importlib.import_module(f"scalgraph.commands.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"scalgraph.commands.{name}":
            return None
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    named = argv[0] if argv and argv[0] in COMMANDS else ""    # "": `scalgraph --help` needs no command's arguments
    parser = build_parser(only=named)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    mod = _command_module(args.command)
    if mod is None:
        print(f"scalgraph {args.command}: not available in this build", file=sys.stderr)
        return 2
    return run_reporting(f"scalgraph {args.command}", lambda: int(mod.run(args) or 0),
                         "rerun with SCALGRAPH_DEBUG=1 for the traceback and report it")


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
