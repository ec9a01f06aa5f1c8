"""The thorough search's clock and voice: its time limit, its progress reports, and the words
that say how it ended."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator


class Watch:
    """A search's clock: `over()` says whether the time limit is reached (None: never) and
    reports progress on the way: {"elapsed_s", "incumbent"} to `progress` at most every
    `every_s` seconds, where `incumbent` is the best objective `best` heard of. The restarts,
    pins and kicks ask it before each plan they make."""

    def __init__(
        self,
        time_limit: float | None = None,
        progress: Callable[[dict[str, float]], None] | None = None,
        every_s: float = 0.25,
    ) -> None:
        self.started = time.perf_counter()
        self.deadline = None if time_limit is None else self.started + time_limit
        self.progress, self.every_s = progress, every_s
        self.reported = -every_s  # seconds in, at the last report
        self.incumbent: float | None = None
        self.reached = False  # the time limit stopped a search
        self.loud = True  # False while the plans are of another problem (`muted`)

    def over(self) -> bool:
        now = time.perf_counter()
        elapsed = now - self.started
        if self.progress is not None and elapsed - self.reported >= self.every_s:
            self.reported = elapsed
            info = {"elapsed_s": elapsed}
            if self.incumbent is not None:
                info["incumbent"] = self.incumbent
            self.progress(info)
        if self.deadline is not None and now >= self.deadline:
            self.reached = True
        return self.reached

    @property
    def listening(self) -> bool:
        """Whether an objective told to `best` now reaches anyone (worth computing for it)."""
        return self.loud and self.progress is not None

    def best(self, objective: float) -> None:
        """A plan of the call's own problem with this objective is the best so far."""
        if self.loud:
            self.incumbent = objective

    @contextlib.contextmanager
    def muted(self) -> Iterator[None]:
        """Meanwhile the searches plan another problem (a smaller one around a pin, one with
        another coverage target): the same clock, but their objectives are not reported."""
        loud, self.loud = self.loud, False
        try:
            yield
        finally:
            self.loud = loud


def search_words(stats: dict) -> str:
    """How a search of the allocator's ended and what won, in words, from a plan's stats
    ("search finished · 64 restarts · won by: training-1 starting at step 18 or later")."""
    restarts, pins, kicks = stats.get("restarts"), stats.get("pins"), stats.get("kicks")
    parts = ["time limit reached" if stats.get("time_limit_reached") else "search finished"]
    won = []
    if isinstance(restarts, dict):
        parts.append(f"{restarts['spent']} restarts")
        won += [_words(*kept) for kept in restarts.get("kept", ())]
    if isinstance(pins, dict):
        parts.append(f"{pins['spent']} pins")
        if pins.get("kept"):
            job, gpu = pins["kept"]
            won.append(f"{job} pinned to GPU {gpu} and up")
    if isinstance(kicks, dict) and kicks.get("improved"):
        won.append("the batch work packed again")
    parts.append(f"won by: {'; '.join(won)}" if won else "nothing beat the first plan")
    return " · ".join(parts)


def _words(kind: str, job: str | None, value: float = 0.0) -> str:
    """One tightening for people."""
    if kind == "price":
        return f"shortfall priced x{value:g} while planning"
    if kind == "out":
        return f"planned without {job}"
    if kind == "size":
        return f"{job} held to {int(value)} GPUs"
    if kind == "after":
        return f"{job} starting at step {int(value)} or later"
    return f"{job} held to at {'least' if kind == 'floor' else 'most'} {int(value)} GPUs"
