"""Real-time demand as a rolling horizon sees it: per-job forecasts in GPUs for each window.

`DemandModel` turns a real-time job's history plus the actuals revealed so far into a forecast
of the next window, in the scenario's steps: it refits the hourly forecaster (by default
`core.forecast.demand.forecast_series`) every `refit_hours`, carries the last fit forward in
between with a level correction from the newest actual, and scales it up for a while after
actual demand ran above it (`boosted`). With less than a day of data it falls back to
`persistence`. `core.rolling.simulate` owns the loop; this module owns the forecasts.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from statistics import NormalDist

import numpy as np
import pandas as pd

from ..model import RealtimeJob, Scenario, ScenarioError

# A real-time job with less than this many hourly values (history + actuals) gets a persistence
# forecast: the forecaster needs at least a day.
MIN_FORECAST_HOURS = 24
# Between refits the last forecast is shifted up by the latest error where demand ran above it,
# decaying by this factor per hour ahead (a mean-reverting level); never down (see below).
LEVEL_PERSISTENCE = 0.85
# Recalibration against recent surprises: when the last BOOST_STEPS actuals ran above the model's
# step-ahead forecasts, the window's forecast is scaled up by that ratio (at most MAX_BOOST),
# fading by BOOST_PERSISTENCE per step ahead.
BOOST_STEPS = 3
MAX_BOOST = 2.0
BOOST_PERSISTENCE = 0.9
# Adaptive headroom: after a step where actual demand exceeded the GPUs a service held, its
# planning quantile moves ADAPT_RAISE of the way to MAX_QUANTILE; every step without a miss the
# extra decays by ADAPT_DECAY back towards the base quantile (held while a coverage SLO is missed).
ADAPT_RAISE = 0.5
ADAPT_DECAY = 0.85
MAX_QUANTILE = 0.995
# When the cluster has no start time, forecasts are dated from this Monday midnight.
DEFAULT_START = datetime(2026, 1, 5)
# Fits kept for the next replay (`_Fits`): a 3-day replay of two services refits 24 times.
KEPT_FITS = 256

Forecaster = Callable[[pd.Series, int, float], pd.DataFrame]


class _Fits:
    """The forecaster's frames by (forecaster, hours, the observed series): shared by every
    replay in the process. Demand is the scenario's, not the plan's, so replays of the same
    workload with other planners (the Horizon page runs two to four) ask for the same fits;
    they take a quarter of a second each and most of a replay's time. Least recently used out
    past `KEPT_FITS`; copies in and out, so no caller sees another's frame change."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.frames: OrderedDict[tuple, pd.DataFrame] = OrderedDict()
        self.lock = threading.Lock()  # (Streamlit sessions replay on threads of their own)

    @staticmethod
    def key(forecaster: Forecaster, observed: pd.Series, hours: int, cap: float) -> tuple:
        digest = hashlib.blake2b(observed.to_numpy(dtype=float).tobytes(), digest_size=16)
        first, freq = observed.index[0], str(observed.index.freq)
        return forecaster, hours, cap, first, freq, digest.digest()

    def get(self, key: tuple) -> pd.DataFrame | None:
        with self.lock:
            frame = self.frames.get(key)
            if frame is not None:
                self.frames.move_to_end(key)
        return None if frame is None else frame.copy()

    def put(self, key: tuple, frame: pd.DataFrame) -> None:
        with self.lock:
            self.frames[key] = frame.copy()
            self.frames.move_to_end(key)
            while len(self.frames) > self.size:
                self.frames.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.frames.clear()


FITS = _Fits(KEPT_FITS)


class DemandModel:
    """Per real-time job: forecasts in GPUs for a window, refitted every `refit_hours`, and the
    demand quantile it is planned at, raised after a surprise and decaying back (`observe`)."""

    def __init__(
        self, actual: Scenario, forecaster: Forecaster, quantile: float | None, refit_hours: float
    ) -> None:
        self.step = actual.cluster.step_minutes
        self.gpus = actual.cluster.gpus
        self.origin = pd.Timestamp(actual.cluster.start or DEFAULT_START)
        self.jobs = actual.realtime_jobs
        self.forecaster = forecaster
        self.quantile = quantile
        self.z = 0.0 if quantile is None else NormalDist().inv_cdf(quantile)
        self.current: dict[str, float] = {job.id: quantile for job in self.jobs if quantile}
        self.refit = pd.Timedelta(hours=refit_hours)
        self.fits: dict[str, tuple[pd.Timestamp, pd.DataFrame]] = {}
        self.refitted = False
        self.predicted: dict[str, dict[int, float]] = {}

    def forecasts(self, t0: int, steps: int) -> dict[str, pd.DataFrame]:
        """Mean, lower, upper, std of each job's demand for window steps 0..steps-1."""
        now = self.origin + pd.Timedelta(minutes=self.step * t0)
        first_hour = now.floor("h")
        hours = math.ceil(((now - first_hour).total_seconds() / 60 + steps * self.step) / 60)
        self.refitted = False
        out = {}
        for job in self.jobs:
            observed = self._hourly(job, t0, first_hour)
            hourly = self._hourly_forecast(job, observed, first_hour, hours)
            frame = self._to_steps(hourly, now, first_hour, steps)
            predicted = self.predicted.setdefault(job.id, {})
            predicted[t0] = float(frame["mean"].iloc[0])
            frame = boosted(frame, self._boost(job, t0, predicted))
            bounded = ["mean", "lower", "upper"]
            frame[bounded] = frame[bounded].clip(0.0, self.cap(job))
            out[job.id] = frame
        return out

    def _boost(self, job: RealtimeJob, t0: int, predicted: dict[int, float]) -> float:
        """How far actual demand ran above the model's step-ahead forecasts lately (>= 1).

        The ratio is taken against the model's own forecasts, not the boosted ones, so it stays
        while the model keeps under-forecasting (a surge it has not learned yet) and fades as
        refits catch up. Only upward: a shortfall costs `penalty_weight` times a batch GPU-step.
        """
        recent = [t for t in range(max(0, t0 - BOOST_STEPS), t0) if t in predicted]
        if not recent:
            return 1.0
        forecast = sum(predicted[t] for t in recent)
        actual = sum(job.demand[t] for t in recent)
        if forecast <= 1e-9:
            return 1.0
        return float(min(max(actual / forecast, 1.0), MAX_BOOST))

    def quantile_of(self, job_id: str) -> float | None:
        """The quantile `job_id` is planned at now (None: the mean)."""
        return self.current.get(job_id, self.quantile)

    def observe(self, job_id: str, missed: bool, below_slo: bool = False) -> None:
        """After a committed step: raise the job's quantile after a miss, else let it decay.

        `below_slo`: the realised coverage so far is under the policy's target, so the raised
        quantile is held instead of decaying.
        """
        if self.quantile is None:
            return
        q = self.current.get(job_id, self.quantile)
        if missed:
            q = q + ADAPT_RAISE * (MAX_QUANTILE - q)
        elif not below_slo:
            q = self.quantile + ADAPT_DECAY * (q - self.quantile)
        self.current[job_id] = min(max(q, self.quantile), MAX_QUANTILE)

    def planning_demand(self, frame: pd.DataFrame, job_id: str | None = None) -> np.ndarray:
        """The demand the planner is given: the job's current quantile (normal, mean and std),
        never above what the job can hold (`cap`)."""
        quantile = self.quantile_of(job_id) if job_id is not None else self.quantile
        z = 0.0 if quantile is None else NormalDist().inv_cdf(quantile)
        values = frame["mean"].to_numpy() + z * frame["std"].to_numpy()
        job = next((j for j in self.jobs if j.id == job_id), None)
        top = self.cap(job) if job is not None else float(self.gpus)
        return np.round(np.clip(np.nan_to_num(values, nan=0.0, posinf=top), 0.0, top), 6)

    def observed(self, job: RealtimeJob, t0: int) -> np.ndarray:
        """The job's demand seen by step t0, hourly: its history, then the whole hours before."""
        now = self.origin + pd.Timedelta(minutes=self.step * t0)
        return self._hourly(job, t0, now.floor("h")).to_numpy(dtype=float)

    def _hourly(self, job: RealtimeJob, t0: int, first_hour: pd.Timestamp) -> pd.Series:
        """History, then the actuals before t0 averaged per whole hour, ending before first_hour."""
        parts = []
        if job.history:
            index = pd.date_range(
                end=self.origin - pd.Timedelta(hours=1), periods=len(job.history), freq="h"
            )
            parts.append(pd.Series(job.history, index=index, dtype=float))
        if t0 > 0:
            index = self.origin + pd.to_timedelta(np.arange(t0) * self.step, unit="min")
            steps = pd.Series(job.demand[:t0], index=index, dtype=float)
            if self.step > 60 and self.step % 60 == 0:  # one step covers several hours
                repeat = self.step // 60
                index = self.origin + pd.to_timedelta(np.arange(t0 * repeat) * 60, unit="min")
                steps = pd.Series(np.repeat(job.demand[:t0], repeat), index=index, dtype=float)
            parts.append(steps.resample("h").mean())
        if not parts:
            return pd.Series(dtype=float, index=pd.DatetimeIndex([]))
        series = pd.concat(parts)
        series = series[~series.index.duplicated(keep="last")]
        series = series[series.index < first_hour]
        if len(series):
            series = series.asfreq("h")
        return series

    def _hourly_forecast(
        self, job: RealtimeJob, observed: pd.Series, first_hour: pd.Timestamp, hours: int
    ) -> pd.DataFrame:
        """Hourly frame from first_hour on: refit when due, else carry the last fit forward."""
        fit = self.fits.get(job.id)
        needed_end = first_hour + pd.Timedelta(hours=hours - 1)
        finite = int(np.isfinite(observed.to_numpy()).sum()) if len(observed) else 0
        if finite < MIN_FORECAST_HOURS:
            return persistence(job, observed, first_hour, hours)
        due = fit is None or first_hour - fit[0] >= self.refit or fit[1].index[-1] < needed_end
        if due:
            horizon = hours + math.ceil(self.refit / pd.Timedelta(hours=1)) + 1
            cap = self.cap(job)
            key = FITS.key(self.forecaster, observed, horizon, cap)
            frame = FITS.get(key)
            if frame is None:
                try:
                    frame = self._fit(observed, horizon, cap)
                except ScenarioError:
                    return persistence(job, observed, first_hour, hours)
                FITS.put(key, frame)
            frame.index = pd.date_range(first_hour, periods=len(frame), freq="h")
            self.fits[job.id] = (first_hour, frame)
            self.refitted = True
            return frame.iloc[:hours]
        fitted_at, frame = fit
        window = frame.loc[first_hour:needed_end].copy()
        last = observed.dropna()
        if len(last) and last.index[-1] >= fitted_at and last.index[-1] in frame.index:
            # upward only: a shortfall costs penalty_weight times what a GPU held idle does,
            # and a service that drops to zero (an outage) comes back at its level at once
            error = max(float(last.iloc[-1] - frame.at[last.index[-1], "mean"]), 0.0)
            lead = (window.index - last.index[-1]) / pd.Timedelta(hours=1)
            shift = error * LEVEL_PERSISTENCE ** np.asarray(lead, dtype=float)
            mean = np.maximum(window["mean"].to_numpy() + shift, 0.0)
            window["upper"] = np.maximum(window["upper"].to_numpy() + shift, mean)
            window["lower"] = np.clip(window["lower"].to_numpy() + shift, 0.0, mean)
            window["mean"] = mean
        return window

    def cap(self, job: RealtimeJob) -> float:
        """The most demand the job can have: its gpus_max, at most the cluster's GPUs."""
        return float(min(job.gpus_max, self.gpus))

    def _fit(self, observed: pd.Series, horizon: int, cap: float) -> pd.DataFrame:
        """The forecaster's frame, bounded by `cap` (passed on where the forecaster takes it)."""
        if "cap" in _parameters(self.forecaster):
            frame = self.forecaster(observed, horizon, 0.9, cap=cap)
        else:
            frame = self.forecaster(observed, horizon, 0.9)
        frame = frame[["mean", "lower", "upper", "std"]].astype(float)
        frame[["mean", "lower", "upper"]] = frame[["mean", "lower", "upper"]].clip(0.0, cap)
        return frame

    def _to_steps(
        self, hourly: pd.DataFrame, now: pd.Timestamp, first_hour: pd.Timestamp, steps: int
    ) -> pd.DataFrame:
        """Average the hours each window step overlaps (a step is rarely longer than an hour)."""
        values = hourly[["mean", "lower", "upper", "std"]].to_numpy(dtype=float)
        offset = (now - first_hour).total_seconds() / 60
        starts = offset + np.arange(steps) * self.step
        first = np.floor(starts / 60).astype(int)
        last = np.maximum(first, np.ceil((starts + self.step) / 60).astype(int) - 1)
        last = np.minimum(last, len(values) - 1)
        first = np.minimum(first, len(values) - 1)
        if np.array_equal(first, last):
            rows = values[first]
        else:
            cumulative = np.vstack([np.zeros((1, 4)), np.cumsum(values, axis=0)])
            rows = (cumulative[last + 1] - cumulative[first]) / (last - first + 1)[:, None]
        return pd.DataFrame(
            rows, columns=["mean", "lower", "upper", "std"], index=pd.RangeIndex(steps, name="step")
        )


def _parameters(forecaster: Forecaster) -> tuple[str, ...]:
    """The names a forecaster takes (none known: a builtin or a C callable)."""
    try:
        return tuple(inspect.signature(forecaster).parameters)
    except (TypeError, ValueError):
        return ()


def boosted(frame: pd.DataFrame, boost: float) -> pd.DataFrame:
    """Scale a forecast up by `boost` at lead 0, fading by BOOST_PERSISTENCE per step ahead."""
    if boost <= 1.0:
        return frame
    factor = 1.0 + (boost - 1.0) * BOOST_PERSISTENCE ** np.arange(len(frame))
    return frame.mul(factor, axis=0)


def persistence(
    job: RealtimeJob, observed: pd.Series, first_hour: pd.Timestamp, hours: int
) -> pd.DataFrame:
    """Too little data to fit: the last value (or what the job held), with the values' spread."""
    values = observed.dropna().to_numpy() if len(observed) else np.array([])
    if len(values):
        level = float(values[-1])
    elif job.previous_gpus is not None:
        level = float(len(job.previous_gpus))
    else:
        level = float(job.gpus_min)
    spread = float(np.std(values)) if len(values) >= 2 else 0.0
    spread = max(spread, 0.25 * level, 0.5)
    z = NormalDist().inv_cdf(0.95)
    mean = np.full(hours, level)
    return pd.DataFrame(
        {
            "mean": mean,
            "lower": np.maximum(mean - z * spread, 0.0),
            "upper": mean + z * spread,
            "std": np.full(hours, spread),
        },
        index=pd.date_range(first_hour, periods=hours, freq="h"),
    )
