"""From demand to GPUs: quantiles of the forecast's predictive distribution, the risk and the
expected size of a shortfall for an allocation, and GPU paths under a swap cap."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..model import ScenarioError


def demand_quantile(forecast: pd.DataFrame, quantile: float) -> np.ndarray:
    """Demand at `quantile` of each step's predictive distribution (normal, mean and std)."""
    if not 0 < quantile < 1:
        raise ScenarioError(f"quantile must be between 0 and 1, got {quantile}")
    mean = forecast["mean"].to_numpy(dtype=float)
    std = forecast["std"].to_numpy(dtype=float)
    return np.maximum(mean + float(norm.ppf(quantile)) * std, 0.0)


def coverage_risk(
    forecast: pd.DataFrame,
    allocated_gpus: Sequence[float] | np.ndarray | float,
    capacity_per_gpu: float,
) -> np.ndarray:
    """Probability, per step, that demand exceeds what the allocated GPUs can serve.

    Demand at a step is normal with the forecast's `mean` and `std`; `capacity_per_gpu` is in
    the history's units (e.g. requests per hour one GPU serves). Non-increasing in the allocation.
    """
    return _normal_tail(forecast, allocated_gpus, capacity_per_gpu)[0]


def expected_shortfall(
    forecast: pd.DataFrame,
    allocated_gpus: Sequence[float] | np.ndarray | float,
    capacity_per_gpu: float,
) -> np.ndarray:
    """E[max(0, demand - served)] per step, in the history's units, under the same normal model."""
    return _normal_tail(forecast, allocated_gpus, capacity_per_gpu)[1]


def _normal_tail(forecast: pd.DataFrame, allocated_gpus, capacity_per_gpu: float):
    """(P(demand > capacity), E[max(0, demand - capacity)]); a tiny std is a point mass."""
    if not capacity_per_gpu > 0:
        raise ScenarioError(f"capacity_per_gpu must be > 0, got {capacity_per_gpu}")
    mean = forecast["mean"].to_numpy(dtype=float)
    std = forecast["std"].to_numpy(dtype=float)
    capacity = np.broadcast_to(np.asarray(allocated_gpus, dtype=float), mean.shape)
    capacity = capacity * capacity_per_gpu
    point = ~(std > 1e-9 * np.maximum(1.0, np.abs(mean)))
    scale = np.where(point, 1.0, std)
    z = np.clip((capacity - mean) / scale, -40.0, 40.0)  # beyond that it is 0 or 1 anyway
    risk = np.where(point, (mean > capacity).astype(float), norm.sf(z))
    excess = np.where(point, mean - capacity, scale * norm.pdf(z) + (mean - capacity) * risk)
    return risk, np.maximum(excess, 0.0)


def gpus_needed(demand: Sequence[float] | np.ndarray, capacity_per_gpu: float) -> np.ndarray:
    """Whole GPUs that serve `demand` (same units as the capacity), per step."""
    if not capacity_per_gpu > 0:
        raise ScenarioError(f"capacity_per_gpu must be > 0, got {capacity_per_gpu}")
    ratio = np.asarray(demand, dtype=float) / capacity_per_gpu
    return np.ceil(np.round(ratio, 9)).astype(int)


def gpu_path(
    target_gpus: Sequence[float] | np.ndarray,
    gpus_min: int,
    gpus_max: int,
    swap_cap: int,
    previous: int | None = None,
    *,
    capacity_per_gpu: float | None = None,
) -> np.ndarray:
    """A GPU count per step within [gpus_min, gpus_max] whose changes stay within `swap_cap`.

    `target_gpus` is the GPUs wanted per step (fractions round up), e.g. `gpus_needed` of a
    `demand_quantile`; with `capacity_per_gpu` it is demand in the capacity's units instead.
    The path covers the target wherever the cap allows it at all: it ramps up early enough to
    meet each peak and comes down as fast as the cap allows afterwards, so shortfall is minimal
    first and surplus second. `previous` is the count held before step 0
    (None: step 0 is free). A `previous` outside the range is walked towards it at the cap.
    """
    for label, value in (("gpus_min", gpus_min), ("gpus_max", gpus_max), ("swap_cap", swap_cap)):
        if int(value) != value or value < 0:
            raise ScenarioError(f"{label} must be a whole number >= 0, got {value!r}")
    if gpus_min > gpus_max:
        raise ScenarioError(f"gpus_min {gpus_min} is larger than gpus_max {gpus_max}")
    if capacity_per_gpu is not None:
        target_gpus = gpus_needed(target_gpus, capacity_per_gpu)
    target = np.ceil(np.round(np.asarray(target_gpus, dtype=float), 9))
    if np.isnan(target).any():
        raise ScenarioError("target_gpus has missing values")
    need = np.clip(target, gpus_min, gpus_max).astype(int)
    steps = len(need)
    envelope = need.copy()  # the least each step may hold so every later peak is still reachable
    for t in range(steps - 2, -1, -1):
        envelope[t] = max(envelope[t], envelope[t + 1] - swap_cap)
    path = np.empty(steps, dtype=int)
    held = previous
    for t in range(steps):
        if held is None:
            count = envelope[t]
        else:
            count = max(envelope[t], held - swap_cap)
            count = min(count, held + swap_cap)
        path[t] = count
        held = count
    return path


def gpu_path_from_forecast(
    forecast: pd.DataFrame,
    capacity_per_gpu: float,
    quantile: float,
    gpus_min: int,
    gpus_max: int,
    swap_cap: int,
    previous: int | None = None,
) -> np.ndarray:
    """`gpu_path` of the GPUs needed to serve the forecast's `quantile` of demand."""
    target = gpus_needed(demand_quantile(forecast, quantile), capacity_per_gpu)
    return gpu_path(target, gpus_min, gpus_max, swap_cap, previous)
