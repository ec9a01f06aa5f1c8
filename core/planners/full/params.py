"""Full mode's options (`FullParams`), the call's clock, the solve lock and the progress
reporter that forwards HiGHS's incumbent and bound to the caller's hook."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...plan import Plan
from .status import _relative_gap

ProgressHook = Callable[[dict[str, float]], None]
_SOLVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class FullParams:
    """Options of full mode. A NaN or negative time limit or gap means none (0).

    `max_model_terms`: above this many placement-step incidences the model is not built (the
    warm start is returned), which caps Pyomo's building near ten seconds.
    `large_model_columns`: above this many binary columns HiGHS's MIP presolve alone outlasts a
    time limit of seconds, so it runs without. `relaxation_share`, `shape_share` and
    `restricted_share`: the shares of the time left for the shape model that gives the first
    bound, for the shape phase that realizes its solution per GPU and for the restricted phase
    (real-time GPUs fixed as in the best plan so far).
    `progress` receives {"elapsed_s", "incumbent", "bound", "gap"} at most every
    `progress_every_s` seconds while HiGHS solves; `warm_start` replaces the allocator's plan.
    """

    time_limit: float = 10.0
    mip_gap: float = 1e-4
    progress: ProgressHook | None = field(default=None, compare=False)
    warm_start: Plan | None = field(default=None, compare=False)
    max_model_terms: int = 400_000
    large_model_columns: int = 10_000
    relaxation_share: float = 0.3
    shape_share: float = 0.5
    restricted_share: float = 0.25
    progress_every_s: float = 0.25

    def __post_init__(self) -> None:
        for name in ("time_limit", "mip_gap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"Expected {name} to be a number.")
            object.__setattr__(self, name, float(value) if value >= 0 else 0.0)
        for name in ("relaxation_share", "shape_share", "restricted_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"Expected {name} in [0, 1].")
        if self.max_model_terms < 0 or self.large_model_columns < 0:
            raise ValueError("Expected max_model_terms and large_model_columns >= 0.")
        if self.progress is not None and not callable(self.progress):
            raise ValueError("Expected progress to be callable.")


class _Clock:
    """The call's deadline: `time_limit` seconds from the start of `plan_full`."""

    # Seconds Pyomo needs per model term to build (kept on the safe side) and the least time
    # worth giving a solver phase.
    BUILD_S_PER_TERM = 40e-6
    MIN_PHASE_S = 0.05
    IMPORT_S = 1.0  # importing Pyomo the first time in a process

    def __init__(self, time_limit: float):
        self.started = time.perf_counter()
        self.limit = time_limit

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float:
        return max(0.0, self.limit - self.elapsed())


class _ProgressReporter:
    """Forwards HiGHS's incumbent and bound to the caller's hook, throttled (`every_s`)."""

    def __init__(self, hook: ProgressHook, every_s: float):
        self.hook: ProgressHook | None = hook
        self.every_s = every_s
        self.started = time.perf_counter()
        self.bound_cap = math.inf  # a bound known before HiGHS starts (the relaxation's)
        self.reports_bound = True  # False while solving a restricted model
        self.reports_incumbent = True  # False while solving the count model
        self.best = -math.inf  # incumbents only improve, across phases
        self.last = -math.inf

    def on_event(self, event: Any) -> None:
        now = time.perf_counter()
        improving = "ImprovingSolution" in str(event.callback_type)
        if not improving and now - self.last < self.every_s:
            return
        out = event.data_out
        self._send(now, out.mip_primal_bound, out.mip_dual_bound)

    def final(self, incumbent: float, bound: float) -> None:
        self._send(time.perf_counter(), incumbent, bound)

    def _send(self, now: float, incumbent: float, bound: float) -> None:
        if self.hook is None:
            return
        self.last = now
        if self.reports_incumbent and abs(incumbent) < 1e30:  # +-inf (or 1e100) before one
            self.best = max(self.best, float(incumbent))
        incumbent = self.best if self.best > -math.inf else math.nan
        if not self.reports_bound or not abs(bound) < 1e30:
            bound = math.inf
        bound = min(float(bound), self.bound_cap)
        try:
            self.hook(
                {
                    "elapsed_s": now - self.started,
                    "incumbent": incumbent,
                    "bound": bound,
                    "gap": _relative_gap(incumbent, bound),
                }
            )
        except Exception:  # a broken display must not stop the solve
            self.hook = None
