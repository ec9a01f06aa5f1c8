"""The forecast's arithmetic: four simple members, weighted by their errors on the history's
own rolling origins, a short-lead error correction, and a split-conformal interval.

Why these members (docs/benchmarks.md, "The demand forecaster"): on real GPU-demand series
nobody tuned to, the level of the last day and the shape of the last week each win somewhere,
and statistical models fitted to three weeks (MSTL, Theta) lose to copying last week on some of
them. A member that lost on this history's own earlier origins gets little weight here; none is
chosen by hand per series.

- `seasonal_naive_week`: the same hour one period (a week, or a day on short histories) ago.
- `smoothed_naive_week`: the same, averaged with the hour either side (less of last week's noise).
- `last_day_level`: the mean of the last day, flat (demand that wanders without a weekly shape).
- `daily_profile`: each hour of the day averaged over the last seven days.

The weights are Bates and Granger's: the inverse of each member's mean squared error, one set
per lead range (short leads favour the level, long ones the shape).
The interval is split-conformal with normalised scores (Lei et al., "Distribution-free
predictive inference for regression", 2018): each origin's errors are divided by the series'
local scale there (its mean hour-to-hour change over the week before), the quantile of those
per lead range times the local scale now is the half-width, floored by seasonal naive's
period-over-period moves over the last two periods. So the interval narrows when the series
calms down and widens when it gets rough, rather than carrying an old incident's errors.
NAIVE_FLOOR was chosen on the development series only (the rule in docs/benchmarks.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .loading import DAY, WEEK

SEASONAL_NAIVE = "seasonal_naive_week"
SMOOTHED = "smoothed_naive_week"
LEVEL = "last_day_level"
PROFILE = "daily_profile"
PROFILE_DAYS = 7  # the daily profile averages this many days (fewer when the history is short)
SMOOTHING_HOURS = 1  # the smoothed seasonal naive averages each hour with this many either side
# Lead-time ranges (hours, inclusive): one set of weights and one interval quantile each
LEAD_RANGES = ((1, 24), (25, 72), (73, 168), (169, 10**9))
MIN_RANGE_ERRORS = 12  # fewer errors than this in a range: the range before it is used
NAIVE_FLOOR = 1.05  # the interval is at least this share of seasonal naive's own error quantile
FLOOR_PERIODS = 2  # ... over the last this many periods (each period's moves from the one before)
SCALE_HOURS = WEEK  # the local scale: the mean hour-to-hour change over this many hours ...
SCALE_SHARE = 0.1  # ... plus this share of the whole history's (an idle week is not certainty)
CORRECTION_HOURS = 6  # the last hours whose error the forecast carries forward ...
CORRECTION_DECAY = 0.9  # ... fading by this factor per hour ahead


def member_name(name: str, period: int) -> str:
    if period != WEEK and name in (SEASONAL_NAIVE, SMOOTHED):
        return name.replace("_week", "_day")
    return name


def members(y: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """Each member's forecast of the `horizon` hours after `y`, one row each (in MEMBERS order)."""
    days = min(PROFILE_DAYS, len(y) // DAY)
    profile = y[len(y) - days * DAY :].reshape(days, DAY).mean(axis=0)
    last = y[-period:]
    k = SMOOTHING_HOURS
    before = y[-period - k : -period] if len(y) >= period + k else last[-k:]
    around = np.concatenate([before, last, last[:k]])  # (the period wraps: its start follows)
    smoothed = np.convolve(around, np.full(2 * k + 1, 1.0 / (2 * k + 1)), mode="valid")
    return np.vstack(
        [
            np.resize(last, horizon),
            np.resize(smoothed, horizon),
            np.full(horizon, float(np.mean(y[-DAY:]))),
            np.resize(profile, horizon),
        ]
    )


MEMBERS = (SEASONAL_NAIVE, SMOOTHED, LEVEL, PROFILE)


def origins(n: int, period: int) -> np.ndarray:
    """Earlier origins inside the history, a day apart, the last a day before its end, each with
    a full period (and a day) before it."""
    return np.arange(n - DAY, period - 1, -DAY)[::-1]


def lead_ranges(horizon: int) -> list[tuple[int, int]]:
    """LEAD_RANGES as zero-based slices [low, high) of a forecast of `horizon` hours."""
    return [(low - 1, min(high, horizon)) for low, high in LEAD_RANGES if low <= horizon]


class Fit(NamedTuple):
    """What `fit` found: the forecast and how it was made."""

    mean: np.ndarray
    half_width: np.ndarray
    weights: np.ndarray  # members x lead ranges
    ranges: list[tuple[int, int]]
    member_mae: np.ndarray  # each member's mean absolute error at the origins
    mae: float  # the combination's
    origins: int
    coverage: float  # the interval's measured coverage at the origins (NaN without errors)
    calibrated: bool  # False: too few errors, the interval is the naive floor alone


def fit(y: np.ndarray, scored: np.ndarray, horizon: int, period: int, level: float) -> Fit:
    """The weighted combination of `members` for `horizon` hours after `y` and its interval.

    `y` is the history as the members see it (complete, outages repaired); `scored` the same
    hours as the errors are measured on (NaN where an hour says nothing about demand).
    """
    n = len(y)
    starts = origins(n, period)
    lead_cap = min(max(horizon, DAY), WEEK)
    ranges = lead_ranges(max(horizon, lead_cap))
    past = np.full((len(starts), len(MEMBERS), lead_cap), np.nan)  # forecasts at each origin
    actual = np.full((len(starts), lead_cap), np.nan)
    for row, origin in enumerate(starts):
        leads = min(lead_cap, n - origin)
        past[row, :, :leads] = members(y[:origin], leads, period)
        actual[row, :leads] = scored[origin : origin + leads]
    errors = np.abs(past - actual[:, None, :])  # origin x member x lead
    weights = _weights(past, actual, ranges, lead_cap)
    by_lead = _per_lead(weights, ranges, lead_cap)
    combined = np.einsum("ml,oml->ol", by_lead, past)
    residuals = np.abs(actual - combined)
    scale = np.array([local_scale(y, int(o)) for o in starts]).reshape(-1, 1)
    scores = residuals / scale  # normalised: comparable between calm and rough origins
    mean = np.einsum("ml,ml->l", _per_lead(weights, ranges, horizon), members(y, horizon, period))
    mean = mean + _correction(combined, actual, n - starts[-1] if len(starts) else 0, horizon)
    half, calibrated = _half_width(scores, ranges, horizon, level)
    half = half * local_scale(y, n)
    recent = FLOOR_PERIODS * period
    floor = _naive_floor(scored[-recent:], y[-recent:], period, max(horizon, lead_cap), level)
    half = np.maximum(half, floor[:horizon])
    seen = np.isfinite(errors)
    member_mae = np.array(
        [
            errors[:, m][seen[:, m]].mean() if seen[:, m].any() else math.nan
            for m in range(len(MEMBERS))
        ]
    )
    finite = np.isfinite(residuals)
    return Fit(
        mean=mean,
        half_width=half,
        weights=weights,
        ranges=ranges,
        member_mae=member_mae,
        mae=float(residuals[finite].mean()) if finite.any() else math.nan,
        origins=len(starts),
        coverage=_measured_coverage(scores, scale[:, 0], ranges, lead_cap, level, floor),
        calibrated=calibrated,
    )


def _weights(
    past: np.ndarray, actual: np.ndarray, ranges: list[tuple[int, int]], lead_cap: int
) -> np.ndarray:
    """Inverse mean-squared-error weights per member and lead range (Bates and Granger's); a
    range without errors borrows the one before it (equal weights when none has any)."""
    out = np.full((len(MEMBERS), len(ranges)), 1.0 / len(MEMBERS))
    for k, (low, high) in enumerate(ranges):
        block = past[:, :, low : min(high, lead_cap)]
        truth = actual[:, low : min(high, lead_cap)]
        seen = np.isfinite(truth) & np.isfinite(block[:, 0, :])
        if low >= lead_cap or not seen.any():
            if k:
                out[:, k] = out[:, k - 1]
            continue
        squared = np.array([((block[:, m] - truth)[seen] ** 2).mean() for m in range(len(MEMBERS))])
        inverse = 1.0 / np.maximum(squared, 1e-12 * max(float(squared.max()), 1.0))
        out[:, k] = inverse / inverse.sum()
    return out


def _per_lead(weights: np.ndarray, ranges: list[tuple[int, int]], horizon: int) -> np.ndarray:
    """The weights spread over leads 1..horizon (members x leads)."""
    out = np.empty((weights.shape[0], horizon))
    for k, (low, high) in enumerate(ranges):
        if low < horizon:
            out[:, low : min(high, horizon)] = weights[:, k : k + 1]
    last = min(ranges[-1][1], horizon)
    out[:, last:] = weights[:, -1:]
    return out


def _correction(combined: np.ndarray, actual: np.ndarray, leads: int, horizon: int) -> np.ndarray:
    """The mean error of the last CORRECTION_HOURS of the last origin's forecast, fading with
    lead: demand running above (below) the combination today is partly there tomorrow."""
    if not len(combined) or leads <= 0:
        return np.zeros(horizon)
    recent = (actual[-1, :leads] - combined[-1, :leads])[-CORRECTION_HOURS:]
    recent = recent[np.isfinite(recent)]
    if not len(recent):
        return np.zeros(horizon)
    return float(recent.mean()) * CORRECTION_DECAY ** np.arange(1, horizon + 1)


def _quantile(errors: np.ndarray, weights: np.ndarray, level: float) -> float:
    """The weighted `level` quantile of `errors`, split-conformal style: the smallest error at
    which the weight at or below it reaches `level` of the total plus one error's weight."""
    order = np.argsort(errors)
    cumulative = np.cumsum(weights[order])
    target = level * (cumulative[-1] + float(np.mean(weights)))
    index = min(int(np.searchsorted(cumulative, target)), len(errors) - 1)
    return float(errors[order][index])


def _half_width(
    residuals: np.ndarray, ranges: list[tuple[int, int]], horizon: int, level: float
) -> tuple[np.ndarray, bool]:
    """Per lead: the conformal `level` quantile of the combination's errors in its lead range,
    every lead of the range weighted alike; non-decreasing with lead. (zeros, False) when no
    range has MIN_RANGE_ERRORS errors."""
    lead_cap = residuals.shape[1] if residuals.ndim == 2 else 0
    quantiles: list[float] = []
    for low, high in ranges:
        block = residuals[:, low : min(high, lead_cap)] if low < lead_cap else np.empty((0, 0))
        seen = np.isfinite(block)
        if seen.sum() >= MIN_RANGE_ERRORS:
            per_lead = np.broadcast_to(seen.sum(axis=0, keepdims=True), block.shape)
            weights = 1.0 / np.maximum(per_lead[seen], 1)
            quantiles.append(_quantile(block[seen], weights, level))
        else:
            quantiles.append(quantiles[-1] if quantiles else math.nan)
    known = [q for q in quantiles if math.isfinite(q)]
    if not known:
        return np.zeros(horizon), False
    quantiles = [q if math.isfinite(q) else known[0] for q in quantiles]
    quantiles = list(np.maximum.accumulate(quantiles))
    out = np.full(horizon, quantiles[-1])
    for (low, high), q in zip(ranges, quantiles, strict=True):
        out[low : min(high, horizon)] = q
    return out, True


def _naive_floor(
    scored: np.ndarray, y: np.ndarray, period: int, horizon: int, level: float
) -> np.ndarray:
    """A lower bound on the half-width from the history's own period-over-period changes.

    A few origins see few surprises; every hour of the history says how far a value moves from
    the same hour a period earlier. NAIVE_FLOOR times the `level` quantile of those moves is the
    least half-width from a day ahead on, shrinking with the square root of the lead below.
    """
    moves = np.abs(scored[period:] - y[:-period])
    moves = moves[np.isfinite(moves)]
    if len(moves) < MIN_RANGE_ERRORS:
        return np.zeros(horizon)
    quantile = _quantile(moves, np.ones(len(moves)), level)
    leads = np.arange(1, horizon + 1)
    return NAIVE_FLOOR * quantile * np.sqrt(np.minimum(leads, DAY) / DAY)


def local_scale(y: np.ndarray, origin: int) -> float:
    """How rough the series is just before `origin`: its mean hour-to-hour change over the
    SCALE_HOURS before it, plus SCALE_SHARE of the whole history's (never zero)."""
    whole = float(np.abs(np.diff(y)).mean()) if len(y) > 2 else 0.0
    window = y[max(0, origin - SCALE_HOURS) : origin]
    recent = float(np.abs(np.diff(window)).mean()) if len(window) > 2 else whole
    return recent + SCALE_SHARE * whole + 1e-9 * max(1.0, float(np.abs(y).max(initial=0.0)))


def _measured_coverage(
    scores: np.ndarray,
    scale: np.ndarray,
    ranges: list[tuple[int, int]],
    lead_cap: int,
    level: float,
    floor: np.ndarray,
) -> float:
    """The interval's coverage at each origin when calibrated on the other origins alone
    (leave one origin out), pooled over every scored hour: what to expect of it next week.
    `scores` are the origins' normalised errors, `scale` each origin's local scale."""
    rows = scores.shape[0]
    if rows < 3:
        return math.nan
    inside = []
    for row in range(rows):
        others = np.delete(scores, row, axis=0)
        half, calibrated = _half_width(others, ranges, lead_cap, level)
        if not calibrated:
            return math.nan
        half = np.maximum(half * scale[row], floor[:lead_cap])
        residual = scores[row] * scale[row]
        seen = np.isfinite(residual)
        inside.append(residual[seen] <= half[seen])
    hours = np.concatenate(inside)
    return float(hours.mean()) if len(hours) else math.nan
