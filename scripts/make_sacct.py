"""Generate a synthetic `sacct -a -X -P` export for the import benchmark (issue 14).

    python scripts/make_sacct.py --jobs 1000000 --out /tmp/sacct_1m.txt

Jobs arrive over `--days` days on a cluster of `--gpus` GPUs: mostly 1-8 GPU training, evaluation
and quantization jobs with log-normal run times, some serving jobs on a `serving` partition, a
few pending, running and CPU-only jobs, array tasks, typed and untyped GPU TRES and
`CANCELLED by <uid>` states, so every quirk the importer handles is on the hot path. Seeded, so
the same arguments write the same file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

FIELDS = (
    "JobIDRaw,JobID,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,"
    "ElapsedRaw,TimelimitRaw,State,AllocTRES,ReqTRES,NNodes,NodeList"
)


def make(jobs: int, days: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    origin = np.datetime64("2026-01-01T00:00:00", "s")
    submit = np.sort(rng.uniform(0, days * 86400, jobs)).astype(np.int64)
    kind = rng.choice(4, jobs, p=[0.55, 0.25, 0.1, 0.1])  # train, eval, quant, serve
    names = np.array(["sft-llama", "eval-harness", "awq-quant", "chat-serve"])[kind]
    partition = np.where(kind == 3, "serving", "gpu")
    gpus = rng.choice([1, 2, 3, 4, 8, 16], jobs, p=[0.45, 0.2, 0.05, 0.15, 0.12, 0.03])
    cpu_only = rng.random(jobs) < 0.05
    wait = rng.exponential(900, jobs).astype(np.int64)
    run = np.clip(rng.lognormal(8.0, 1.3, jobs), 60, 7 * 86400).astype(np.int64)
    limit_min = (np.ceil(run * rng.uniform(1.1, 3.0, jobs) / 60)).astype(np.int64)
    end_time = days * 86400
    start = submit + wait
    end = start + run
    pending = start > end_time
    running = ~pending & (end > end_time)
    state = np.where(rng.random(jobs) < 0.1, "FAILED", "COMPLETED").astype(object)
    cancelled = rng.random(jobs) < 0.05
    state[cancelled] = (
        "CANCELLED by "
        + pd.Series(rng.integers(1000, 9999, cancelled.sum())).astype(str).to_numpy()
    )
    state[running] = "RUNNING"
    state[pending] = "PENDING"

    def stamp(seconds: np.ndarray) -> np.ndarray:
        return np.datetime_as_string(origin + seconds, unit="s").astype(object)

    start_s, end_s = stamp(start), stamp(end)
    start_s[pending] = "Unknown"
    end_s[pending | running] = "Unknown"
    typed = rng.random(jobs) < 0.3
    base = "billing=" + (gpus * 2).astype(str) + ",cpu=" + (gpus * 2).astype(str)
    gres = np.where(
        typed,
        ",gres/gpu:a100=" + gpus.astype(str) + ",gres/gpu=" + gpus.astype(str),
        ",gres/gpu=" + gpus.astype(str),
    )
    tres = np.where(cpu_only, base, base + gres) + ",mem=64G,node=1"
    alloc = np.where(pending, "", tres)
    ids = np.arange(1_000_000, 1_000_000 + jobs).astype(str).astype(object)
    array = rng.random(jobs) < 0.1
    job_id = ids.copy()
    job_id[array] = ids[array] + "_" + (np.arange(array.sum()) % 50).astype(str)
    elapsed = np.where(pending, 0, np.minimum(run, np.maximum(0, end_time - start))).astype(
        np.int64
    )
    users = "u" + rng.integers(0, 400, jobs).astype(str).astype(object)
    frame = pd.DataFrame(
        {
            "JobIDRaw": ids,
            "JobID": job_id,
            "JobName": names,
            "User": users,
            "Account": "acct" + rng.integers(0, 30, jobs).astype(str).astype(object),
            "Partition": np.where(cpu_only, "cpu", partition),
            "QOS": rng.choice(["normal", "high", "low"], jobs, p=[0.8, 0.1, 0.1]),
            "Priority": rng.integers(1, 100_000, jobs),
            "Submit": stamp(submit),
            "Eligible": stamp(submit),
            "Start": start_s,
            "End": end_s,
            "ElapsedRaw": elapsed,
            "TimelimitRaw": limit_min,
            "State": state,
            "AllocTRES": alloc,
            "ReqTRES": tres,
            "NNodes": np.maximum(1, gpus // 8),
            "NodeList": np.where(
                pending, "None assigned", "gpu" + (np.arange(jobs) % 512).astype(str)
            ),
        }
    )
    return frame[FIELDS.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=365.0)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    frame = make(args.jobs, args.days, args.seed)
    frame.to_csv(args.out, sep="|", index=False)
    print(f"wrote {len(frame):,} jobs to {args.out} ({args.out.stat().st_size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
