"""The same plans, provably: a hash of every planner's grid on a fixed set of scenarios.

    .venv/bin/python scripts/plan_hashes.py            # print the hashes as JSON Lines
    .venv/bin/python scripts/plan_hashes.py --write    # store them in scripts/plan_hashes.jsonl
    .venv/bin/python scripts/plan_hashes.py --check    # compare with the stored ones (exit 1 on
                                                       #   any difference, naming each case)
    .venv/bin/python scripts/plan_hashes.py --check --quick   # every 5th case only

A refactoring that moves planner code must leave every hash as it was. The cases:
- `fifo`, `backfill` and `allocator` on 282 scenarios: the 12 in data/scenarios/ (one on node
  groups, mixed-nodes) and 270
  drawn ones, issue 13's wide shape (seeds 2000-2149), the benchmarks' day shape (20000-20059)
  and the small shape with a 95% coverage target (4000-4059);
- `thorough` (no time limit, so its search is the same every run) on small draws 0-29;
- `full` (60 s limit, proved well within it) on small draws 0-19: the hash is of the grid and
  the solver's status, so a proof the refactoring lost shows too.
The hash is SHA-256 of the grid's shape and its int32 bytes. A case that ran in an earlier round
but not now (or the reverse) also fails the check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from core.bench import small_case  # noqa: E402
from core.formats import load_scenario  # noqa: E402
from core.model import Scenario  # noqa: E402
from core.planners import solve  # noqa: E402

STORE = ROOT / "scripts" / "plan_hashes.jsonl"
QUEUES = ("fifo", "backfill", "allocator")


def cases() -> Iterator[tuple[str, str, Scenario, dict]]:
    """(case name, planner, scenario, options) for every stored hash, in a fixed order."""
    for path in sorted((ROOT / "data" / "scenarios").glob("*.json")):
        scenario = load_scenario(path)
        for planner in QUEUES:
            yield f"data/{path.stem}", planner, scenario, {}
    draws = [
        *((f"wide-{k}", dict(wide=True), k) for k in range(2000, 2150)),
        *((f"day-{k}", dict(day=True), k) for k in range(20000, 20060)),
        *((f"slo-{k}", dict(slo=0.95), k) for k in range(4000, 4060)),
    ]
    for name, shape, seed in draws:
        scenario = small_case(seed, **shape)
        for planner in QUEUES:
            yield name, planner, scenario, {}
    for seed in range(30):
        yield f"small-{seed}", "thorough", small_case(seed), {"time_limit": 1e9}
    for seed in range(20):
        yield f"small-{seed}", "full", small_case(seed), {"time_limit": 60.0}


def grid_hash(grid: np.ndarray) -> str:
    grid = np.ascontiguousarray(grid, dtype=np.int32)
    digest = hashlib.sha256(repr(grid.shape).encode())
    digest.update(grid.tobytes())
    return digest.hexdigest()[:16]


def compute(quick: bool = False) -> Iterator[dict]:
    for k, (name, planner, scenario, options) in enumerate(cases()):
        if quick and k % 5:
            continue
        plan = solve(scenario, planner, **options)
        row = {"case": name, "planner": planner, "grid": grid_hash(plan.grid)}
        if planner == "full":
            row["status"] = str(plan.stats.get("status"))
        yield row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"store the hashes in {STORE.name}")
    mode.add_argument("--check", action="store_true", help="compare with the stored hashes")
    parser.add_argument("--quick", action="store_true", help="with --check: every 5th case")
    args = parser.parse_args(argv)
    if args.quick and not args.check:
        parser.error("--quick goes with --check")

    started = time.perf_counter()
    if not args.check:
        rows = []
        for row in compute():
            rows.append(row)
            if not args.write:
                print(json.dumps(row))
            elif len(rows) % 100 == 0:
                print(f"{len(rows)} plans hashed...", file=sys.stderr)
        if args.write:
            STORE.write_text("".join(json.dumps(r) + "\n" for r in rows))
            print(f"stored {len(rows)} hashes in {STORE.relative_to(ROOT)}", file=sys.stderr)
        return 0

    stored = [json.loads(line) for line in STORE.read_text().splitlines() if line.strip()]
    if args.quick:
        stored = stored[::5]
    differ = 0
    seen = 0
    by_case = {(r["case"], r["planner"]): r for r in stored}  # (a new scenario file shifts none)
    for row in compute(args.quick):
        seen += 1
        want = by_case.get((row["case"], row["planner"]))
        if row != want:
            differ += 1
            print(f"DIFFERS {row['case']} {row['planner']}: now {row}, stored {want}")
        if seen % 100 == 0:
            print(f"{seen} plans checked...", file=sys.stderr)
    if seen != len(stored):
        differ += 1
        print(f"DIFFERS: {seen} cases now, {len(stored)} stored")
    took = time.perf_counter() - started
    verdict = "the same plans" if not differ else f"{differ} differ"
    print(f"{seen} plans checked against {STORE.relative_to(ROOT)} in {took:.0f} s: {verdict}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
