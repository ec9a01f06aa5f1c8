"""Quantization jobs: GPU-hours from calibration tiers by parameter count, per algorithm.

The tiers live in `data/quantization_tiers.csv` (documented in `data/quantization_tiers.md`).
A safety margin is added and the result rounded up to whole GPU-hours, so the reservation a
planner makes is never short for an ordinary model.
"""

from __future__ import annotations

import functools
import io
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..formats import read_text
from ..model import ScenarioError, is_power_of_two
from .training import batch_job_row

ALGORITHMS = ("bitsandbytes", "awq", "gptq")
DEFAULT_MARGIN = 0.25
TIERS = Path(__file__).resolve().parents[2] / "data" / "quantization_tiers.csv"
TIER_COLUMNS = ("algorithm", "params_max_billion", "gpu_hours", "gpus")


@dataclass(frozen=True)
class QuantizationEstimate:
    """Whole GPU-hours (margin included) on a fixed block of `gpus` GPUs."""

    gpu_hours: int
    gpus: int
    tier: str  # e.g. "awq up to 14B"
    algorithm: str
    params_billion: float
    base_gpu_hours: float  # the tier's hours before the margin
    margin: float
    extrapolated: bool = False

    def job_row(
        self, id: str, priority: float, arrival_step: int = 0, max_gpus: int | None = None
    ) -> dict:
        """A scenario job (SPEC section 3): a fixed-shape quantization block."""
        return batch_job_row(
            id,
            "quantization",
            priority,
            arrival_step,
            self.gpus,
            self.gpus,
            self.gpu_hours,
            max_gpus,
        )


def load_tiers(path: str | Path = TIERS) -> pd.DataFrame:
    """The tier table, checked: known algorithms, increasing tiers, positive hours, 2^k GPUs."""
    name = Path(path).name
    try:
        table = pd.read_csv(io.StringIO(read_text(path)), skipinitialspace=True)
    except (pd.errors.ParserError, ValueError) as e:
        raise ScenarioError(f"{name}: cannot be read as CSV ({e})") from None
    missing = [c for c in TIER_COLUMNS if c not in table.columns]
    if missing:
        raise ScenarioError(f"{name}: missing columns {', '.join(missing)}")
    for i, row in enumerate(table.to_dict("records")):
        owner = f"{name}: row {i + 2}"
        if row["algorithm"] not in ALGORITHMS:
            raise ScenarioError(
                f"{owner}: algorithm {row['algorithm']!r} is not one of {', '.join(ALGORITHMS)}"
            )
        for column in ("params_max_billion", "gpu_hours", "gpus"):
            value = pd.to_numeric(row[column], errors="coerce")
            if not (pd.notna(value) and math.isfinite(value) and value > 0):
                raise ScenarioError(f"{owner}: {column} must be a number > 0, got {row[column]!r}")
        if not is_power_of_two(int(row["gpus"])) or row["gpus"] != int(row["gpus"]):
            raise ScenarioError(f"{owner}: gpus {row['gpus']} is not a power of two")
    for algorithm in ALGORITHMS:
        tiers = table[table["algorithm"] == algorithm]
        if tiers.empty:
            raise ScenarioError(f"{name}: no tiers for {algorithm}")
        for column in ("params_max_billion", "gpu_hours"):
            if not tiers[column].is_monotonic_increasing or tiers[column].duplicated().any():
                raise ScenarioError(f"{name}: {algorithm} tiers must have increasing {column}")
    return table


@functools.cache
def _default_tiers() -> pd.DataFrame:
    return load_tiers(TIERS)


def estimate_quantization(
    params_billion: float,
    algorithm: str,
    margin: float = DEFAULT_MARGIN,
    tiers: pd.DataFrame | None = None,
) -> QuantizationEstimate:
    """GPU-hours to quantize a model of `params_billion` with `algorithm`, margin included."""
    if algorithm not in ALGORITHMS:
        raise ScenarioError(f"algorithm {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
    if (
        isinstance(params_billion, bool)
        or not isinstance(params_billion, int | float)
        or not (math.isfinite(params_billion) and params_billion > 0)
    ):
        raise ScenarioError(f"params_billion must be a number > 0, got {params_billion!r}")
    if not (isinstance(margin, int | float) and math.isfinite(margin) and margin >= 0):
        raise ScenarioError(f"margin must be a number >= 0, got {margin!r}")
    table = _default_tiers() if tiers is None else tiers
    rows = table[table["algorithm"] == algorithm].sort_values("params_max_billion")
    fitting = rows[rows["params_max_billion"] >= params_billion]
    if len(fitting):
        tier = fitting.iloc[0]
        base, gpus = float(tier["gpu_hours"]), int(tier["gpus"])
        label = f"{algorithm} up to {tier['params_max_billion']:g}B"
        extrapolated = False
    else:  # above the largest tier: scale its hours with size, its GPUs with each doubling
        top = rows.iloc[-1]
        ratio = params_billion / float(top["params_max_billion"])
        base = float(top["gpu_hours"]) * ratio
        gpus = int(top["gpus"]) * 2 ** math.ceil(math.log2(ratio))
        label = f"{algorithm} above {top['params_max_billion']:g}B (extrapolated)"
        extrapolated = True
    hours = math.ceil(round(base * (1 + margin), 9))
    return QuantizationEstimate(
        max(hours, 1),
        gpus,
        label,
        algorithm,
        float(params_billion),
        base,
        float(margin),
        extrapolated,
    )
