"""Write the app's sample hourly traffic history: data/histories/chat_requests_hourly.csv.

Eight weeks of requests per hour for a chat API, starting on a Monday: a daily shape (quiet at
night, a peak mid-afternoon), a weekend dip, a slowly wandering level and multiplicative noise.
The seed is fixed, so running it again writes the same file. `weekly_shape()` is the known
profile the forecast tests check the fitted model against.

    .venv/bin/python scripts/make_sample_history.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20260601
START = "2026-06-01 00:00"  # a Monday
WEEKS = 8
BASE_REQUESTS = 2000.0  # requests per hour at the weekly mean
WEEKEND_FACTOR = 0.6
NOISE = 0.06  # multiplicative, per hour
LEVEL_WANDER = 0.02  # AR(1) innovations of the slowly moving level
OUT = Path(__file__).resolve().parent.parent / "data" / "histories" / "chat_requests_hourly.csv"


def weekly_shape() -> np.ndarray:
    """Expected requests per hour for each hour of the week (Monday 00:00 first), 168 values."""
    hour_of_week = np.arange(168)
    hour = hour_of_week % 24
    day = hour_of_week // 24
    daily = 0.35 + 0.65 * np.exp(-0.5 * ((hour - 14) / 4.0) ** 2)  # night trough, 14:00 peak
    weekend = np.where(day >= 5, WEEKEND_FACTOR, 1.0)
    shape = daily * weekend
    return BASE_REQUESTS * shape / shape.mean()


def sample_history(weeks: int = WEEKS, seed: int = SEED) -> pd.DataFrame:
    """The history as a table with columns timestamp, requests."""
    rng = np.random.default_rng(seed)
    hours = weeks * 168
    level = np.empty(hours)
    wander = 0.0
    for t in range(hours):
        wander = 0.97 * wander + rng.normal(0.0, LEVEL_WANDER)
        level[t] = wander
    expected = np.resize(weekly_shape(), hours)
    requests = expected * np.exp(level + rng.normal(0.0, NOISE, hours))
    stamps = pd.date_range(START, periods=hours, freq="h")
    return pd.DataFrame({"timestamp": stamps, "requests": np.round(requests, 1)})


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table = sample_history()
    table.to_csv(OUT, index=False, date_format="%Y-%m-%d %H:%M")
    print(f"wrote {OUT} ({len(table)} hours)")


if __name__ == "__main__":
    main()
