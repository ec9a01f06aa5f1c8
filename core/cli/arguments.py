"""The command line's argument types and output paths, shared by the commands: each type
refuses a bad value with one line that says what it must be (argparse turns it into
`error: ...`, exit 2)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from ..model import MAX_STEPS, ScenarioError
from ..planners import PLANNER_NAMES, PLANNERS, planner_options

EXIT_OK, EXIT_ILLEGAL, EXIT_BAD_INPUT = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse with bad arguments as one `error:` line (exit 2), not a usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def planner_list(text: str) -> list[str]:
    """'fifo,allocator' -> ['fifo', 'allocator']; unknown or repeated names are refused."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PLANNER_NAMES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown planner {', '.join(map(repr, unknown)) or repr(text)}; "
            f"choose from {', '.join(PLANNER_NAMES)}"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a planner is named twice in {text!r}")
    return names


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def share(text: str) -> float:
    """A quantile strictly between 0 and 1."""
    value = finite_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {text}")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def days(text: str) -> float:
    """Days to simulate: no more than the longest horizon (10,080 steps of one week) holds."""
    value = positive_float(text)
    longest = MAX_STEPS * 7
    if value > longest:
        raise argparse.ArgumentTypeError(
            f"must be at most {longest:,} ({MAX_STEPS:,} steps of a week), got {text}"
        )
    return value


def horizon_hours(text: str) -> int:
    value = positive_int(text)
    if value > MAX_STEPS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_STEPS:,} hours, got {text}")
    return value


def level(text: str) -> float:
    value = finite_float(text)
    if not 0.001 <= value <= 0.999:
        raise argparse.ArgumentTypeError(f"must be between 0.001 and 0.999, got {text}")
    return value


def out_folder(text: str) -> Path:
    """An output folder: existing and writable, or creatable inside a writable folder."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    _writable_ancestor(path if path.exists() else path.parent, text)
    return path


def out_file(text: str) -> Path:
    """An output file: not a folder, in a folder that exists or can be made, and can be written
    (`write_file` makes the folder, as the commands that write folders do)."""
    path = Path(text)
    if text == "-":
        raise argparse.ArgumentTypeError("'-' is no file name here (give a file)")
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be written (no permission)")
    _writable_ancestor(path.parent, text)
    return path


def write_file(path: Path, text: str) -> None:
    """Write an output file given with --out, making its folder first."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:  # (a full disk, /dev/full: errors without a file name)
        raise ScenarioError(f"{path}: cannot write ({e.strerror or e})") from None


def _writable_ancestor(folder: Path, text: str) -> None:
    """The nearest existing folder on the way to `folder` must be a folder we may write in."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{existing} is a file, so {text} cannot be made")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write in {existing} (no permission) for {text}")


def number_list(flag: str, text: str | None, *, integer: bool = False) -> list[float] | None:
    """A comma list of numbers from the command line (None when the flag was not given)."""
    if text is None:
        return None
    values = []
    for part in text.split(","):
        values.append(number(flag, part.strip(), integer=integer))
    return values


def number(flag: str, text: str | None, *, integer: bool = False) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        kind = "whole numbers" if integer else "numbers"
        raise ScenarioError(f"{flag}: {text!r} is not a number (give {kind})") from None
    if integer and value.is_integer():
        return int(value)
    if integer:
        raise ScenarioError(f"{flag}: {text!r} is not a whole number")
    return value


def planner_options_for(args: argparse.Namespace) -> dict:
    """The command's planner options that the chosen planner accepts."""
    return planner_options(
        args.planner, time_limit=args.time_limit, mip_gap=getattr(args, "gap", 1e-4)
    )


def exact_names() -> str:
    return " and ".join(name for name, spec in PLANNERS.items() if spec.exact) or "exact"


def searching_names() -> str:
    return " and ".join(name for name, spec in PLANNERS.items() if spec.searches)
