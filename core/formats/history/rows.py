"""Every row of the file accounted for: used, or skipped with its reason.

`account_rows` gives each GPU job exactly one fate, in this order: used (a batch job of the
window, or real-time demand in the window or in the history before it), cancelled before it
started, ran for 0 seconds, larger than the cluster, held by no node group of its GPU types
(SPEC section 8: no allowed group holds its block), and otherwise outside the window. Rows
the format's reader did not keep (sacct's job step rows) and rows without GPUs are counted
with their own reasons, so `used` plus the skipped counts is the file's data rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .arrays import _Batch, _Jobs, _Realtime, _Span
from .table import TraceInfo

NO_GPUS = "no GPUs"
CANCELLED = "cancelled before it started"
ZERO_RUN = "ran for 0 seconds"
OUTSIDE = "outside the window"
NO_GROUP = "no node group of its GPU types holds its block"


def too_big_reason(gpus: int) -> str:
    return f"needs more than the cluster's {gpus} GPUs"


def account_rows(
    info: TraceInfo,
    cpu_rows: np.ndarray,
    j: _Jobs,
    batch: _Batch,
    rt: _Realtime,
    span: _Span,
    too_big: np.ndarray,
    gpus: int,
    no_group: np.ndarray | None = None,
) -> dict[str, Any]:
    """`{"total": N, "used": U, "skipped": {reason: n}}` with U + sum(skipped) == N.

    Counts are of the file's rows (`cpu_rows` and the jobs' `row`: the line or item each came
    from): a row that became several jobs (a Slurm array range) is used when one of them is.
    """
    W0, W1 = span.W0, span.W1
    used = batch.in_window | rt.live
    cancelled = ~j.is_rt & j.never_ran & (j.submit < W1) & (j.end > W0)
    wanted_in = (rt.wanted_from < W1) & (rt.wanted_until >= W0)
    zero = j.zero_run & (j.submit < W1) & (j.end >= W0)
    zero |= j.is_rt & (rt.wanted_until <= rt.wanted_from) & wanted_in
    if no_group is None:
        no_group = np.zeros(len(used), dtype=bool)
    fate = np.select([used, cancelled, zero, too_big, no_group], [0, 1, 2, 3, 6], default=4)
    reasons = (None, CANCELLED, ZERO_RUN, too_big_reason(gpus), OUTSIDE, NO_GPUS, NO_GROUP)
    rows = np.concatenate([j.table["row"].to_numpy(dtype=np.int64), cpu_rows])
    fates = np.concatenate([fate, np.full(len(cpu_rows), 5)])
    per_row = pd.Series(fates).groupby(rows).min()
    counts = per_row.value_counts()
    skipped = dict(info.dropped)
    for code, reason in enumerate(reasons):
        n = int(counts.get(code, 0))
        if reason is not None and n:
            skipped[reason] = skipped.get(reason, 0) + n
    return {"total": int(info.rows), "used": int(counts.get(0, 0)), "skipped": skipped}
