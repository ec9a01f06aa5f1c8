"""Import every shared real trace (../shared/traces) with the default window and compare what
really ran (as-run) with fifo and the allocator on the same grid and the same demand.

    .venv/bin/python scripts/trace_imports.py [--traces DIR] [--step-minutes M]

Per trace: the summary's rows line, the rounding line, then as-run, fifo and the allocator's
utilization, priority-weighted value, completed batch jobs and real-time coverage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.formats.history import (  # noqa: E402
    ImportWindow,
    import_history,
    rounding_line,
    rows_line,
)
from core.model import IMPORT_STEP_MINUTES  # noqa: E402
from core.plan import metrics  # noqa: E402
from core.planners import solve  # noqa: E402

TRACES = (
    "openb_pod_list_default.csv",
    "openb_pod_list_gpuspec10.csv",
    "openb_pod_list_multigpu20.csv",
    "alibaba_v2025_dlrm_even_apps.csv",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--step-minutes", type=int, default=IMPORT_STEP_MINUTES)
    args = parser.parse_args()
    for name in TRACES:
        path = args.traces / name
        if not path.is_file():
            print(f"{name}: not found in {args.traces}, skipped", file=sys.stderr)
            continue
        started = time.perf_counter()
        result = import_history(path, window=ImportWindow(step_minutes=args.step_minutes))
        s, a = result.summary, result.as_run
        w = s["window"]
        print(f"## {name} ({s['format']}), window {w['start']} .. {w['end']}, {w['gpus']} GPUs")
        print(rows_line(s))
        if line := rounding_line(s):
            print(line)
        print(f"{'':10} {'utilization':>11} {'value':>10} {'completed':>11} {'rt coverage':>11}")
        rows = [] if s["snapshot"] else [("as-run", a)]
        for planner in ("fifo", "allocator"):
            print(f"  planning {planner} ...", file=sys.stderr, flush=True)
            rows.append((planner, metrics(result.scenario, solve(result.scenario, planner))))
        for label, m in rows:
            done = f"{m['completed_jobs']}/{m['batch_jobs']}"
            print(
                f"{label:10} {m['utilization']:>11.1%} {m['value']:>10,.1f} {done:>11} "
                f"{m['rt_coverage']:>11.2%}"
            )
        print(f"({time.perf_counter() - started:.1f} s)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
