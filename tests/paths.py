"""Where the suite's files live, as constants for the few places that need a path at import time.

Tests take the `data_dir`, `scenarios_dir` and `traces_dir` fixtures of conftest.py; these
constants are for what pytest reads while collecting (parametrize lists, skipif conditions) and
for subprocess working directories.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"
SCENARIOS_DIR = DATA_DIR / "scenarios"
# Real cluster traces sit beside the checkout, in the project's shared folder, when it is there.
TRACES_DIR = ROOT.parent / "shared" / "traces"
