"""The `gpuplan` command line (also `python -m core`): SPEC section 4.

Each command is a module of this package with `add_arguments(parser)` and `run(args)`; the
registry below names them, and only the command being run is imported (as pip's command
registry does), so `gpuplan --help` and a command's own run load no other command's code.
Bad input exits 2 with one line `error: ...` on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NamedTuple

from ..model import ScenarioError
from .arguments import EXIT_BAD_INPUT, Parser
from .inputs import spooled_inputs

__all__ = ["COMMANDS", "main"]


class Command(NamedTuple):
    module: str  # in this package
    summary: str  # the line `gpuplan --help` shows


COMMANDS: dict[str, Command] = {
    "plan": Command("plan", "plan a scenario and print its metrics (JSON or a table)"),
    "check": Command("check", "check a grid CSV against a scenario's constraints"),
    "bench": Command("bench", "run the benchmark scenarios through the planners"),
    "forecast": Command("forecast", "fit the weekly demand profile to a history"),
    "simulate": Command("simulate", "rolling horizon: re-plan, commit, repeat"),
    "workspace": Command(
        "workspace", "saved scenarios and runs (the app's Saved page, from the shell)"
    ),
    "import": Command(
        "history", "a scheduler history (sacct, pod list, job log) -> a scenario + as-run"
    ),
    "sweep": Command("sweep", "capacity what-ifs: every planner at every point"),
    "size": Command("size", "smallest multiple of --step GPUs meeting the targets"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(only=argv[0] if argv else None).parse_args(argv)
    try:
        with spooled_inputs(args):
            return args.run(args)
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # stdout closed early (`| head`): quiet, as other tools are
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE
    except OSError as e:  # writing an output the checks at parse time could not foresee
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}cannot write ({e.strerror or e})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only` a command's name, the other commands are listed (for
    `--help` and for a mistyped name) but their modules are not imported."""
    parser = Parser(
        prog="gpuplan",
        description="Plan who runs where on a GPU cluster (see the README for the model).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        subparser = sub.add_parser(name, help=command.summary)
        if only is None or only not in COMMANDS or name == only:
            module = importlib.import_module(f"{__name__}.{command.module}")
            module.add_arguments(subparser)
            subparser.set_defaults(run=module.run)
    return parser
