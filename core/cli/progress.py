"""Progress on stderr for the commands that take more than a second: one line rewritten in
place on a terminal, one line every two seconds in a log."""

from __future__ import annotations

import math
import sys
import time


class StderrLine:
    """Progress on stderr: every update on a terminal (one line rewritten in place), else one
    line every `every_s` seconds (so a log stays short)."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self.tty = sys.stderr.isatty()
        self.last = -every_s

    def due(self, elapsed: float) -> bool:
        """Whether an update `elapsed` seconds in is shown (and counts as the last one)."""
        if not self.tty and elapsed - self.last < self.every_s:
            return False
        self.last = elapsed
        return True

    def say(self, line: str, last: bool = False) -> None:
        """One line: rewritten in place on a terminal (the last one stays)."""
        print(("\r" + line.ljust(78)) if self.tty else line,
              end="\n" if last or not self.tty else "", file=sys.stderr, flush=True)  # fmt: skip


class SimulationLine(StderrLine):
    """The rolling horizon's progress (`simulate`'s `progress` hook), then how long it took."""

    def __init__(self, planner: str) -> None:
        super().__init__()
        self.planner = planner
        self.started = time.perf_counter()

    def __call__(self, fraction: float, message: str) -> None:
        elapsed = time.perf_counter() - self.started
        if self.due(elapsed):
            self.say(f"simulate ({self.planner}): {fraction:.0%} · {message} · {elapsed:.1f} s")

    def finish(self, replans: int) -> None:
        elapsed = time.perf_counter() - self.started
        self.say(f"simulate ({self.planner}): {replans} re-plans in {elapsed:.1f} s", True)


class ProgressLine(StderrLine):
    """A searching planner's progress (its `progress` hook), then how its search ended."""

    def __init__(self, name: str, time_limit: float) -> None:
        super().__init__()
        self.name, self.time_limit = name, time_limit

    def __call__(self, info: dict) -> None:
        elapsed = float(info.get("elapsed_s", 0.0))
        if not self.due(elapsed):
            return
        parts = [f"{elapsed:.1f} s of {self.time_limit:g} s"]
        for key, text in (("incumbent", "incumbent {:,.1f}"), ("bound", "bound {:,.1f}")):
            if info.get(key) is not None and math.isfinite(info[key]):
                parts.append(text.format(info[key]))
        if info.get("gap") is not None and math.isfinite(info["gap"]):
            parts.append(f"gap {info['gap']:.2%}")
        self.say(f"{self.name}: " + " · ".join(parts))

    def finish(self, stats: dict) -> None:
        from ..planners import SolveStatus
        from ..planners.allocator import search_words

        status = stats.get("status")
        runtime = float(stats.get("runtime_ms", 0.0)) / 1000
        if status is None:  # a search without a bound (thorough)
            self.say(f"{self.name}: {search_words(stats)} ({runtime:,.1f} s)", True)
            return
        words = SolveStatus(status).words if status in set(SolveStatus) else str(status)
        line = f"{self.name}: {words} after {runtime:,.1f} s"
        if stats.get("most_coverage") is not None:  # a coverage target no plan reaches
            proved = "proved" if stats.get("most_coverage_proved") else "not proved"
            line += f"; most coverage {stats['most_coverage']:.1%} ({proved})"
        self.say(line, True)
