"""Demand forecaster: real-trace backtest, known sample shape, risk, GPU paths, bad histories."""

from __future__ import annotations

import io
import runpy
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.forecast.demand import (
    MAX_HORIZON_HOURS,
    SEASONAL_NAIVE,
    ForecastReport,
    coverage_risk,
    demand_quantile,
    forecast_file,
    forecast_series,
    gpu_path,
    gpu_path_from_forecast,
    gpus_needed,
    load_history,
)
from core.forecast.ensemble import MEMBERS
from core.model import ScenarioError
from tests.budget import examples
from tests.paths import DATA_DIR, ROOT, TRACES_DIR

SAMPLE = DATA_DIR / "histories" / "chat_requests_hourly.csv"
GENERATOR = ROOT / "scripts" / "make_sample_history.py"
# ../shared/traces beside the checkout; a worktree one level deeper looks one more level up
TRACES = next(
    (p for p in (TRACES_DIR, ROOT.parent.parent / "shared" / "traces") if p.is_dir()), TRACES_DIR
)
TRACE = TRACES / "philly_active_nodes_hourly.csv"
WEEK = 168


@pytest.fixture(scope="module")
def sample() -> pd.Series:
    history, warnings = load_history(SAMPLE)
    assert warnings == []
    return history


@pytest.fixture(scope="module")
def generator() -> dict:
    return runpy.run_path(str(GENERATOR))


def weekly_backtest(history: pd.Series, train_weeks: int = 3) -> dict:
    """Train on `train_weeks`, forecast the next week, for every week of the history."""
    values = history.to_numpy()
    model_errors, naive_errors, inside = [], [], []
    models = []
    for origin in range(train_weeks * WEEK, len(values) - WEEK + 1, WEEK):
        train = history.iloc[origin - train_weeks * WEEK : origin]
        actual = values[origin : origin + WEEK]
        forecast = forecast_series(train, WEEK, level=0.9)
        models.append(forecast.attrs["model"])
        last_week = train.interpolate(limit_direction="both").to_numpy()[-WEEK:]
        seen = np.isfinite(actual)
        model_errors.append(np.abs(forecast["mean"].to_numpy() - actual)[seen])
        naive_errors.append(np.abs(last_week - actual)[seen])
        inside.append(
            ((actual >= forecast["lower"].to_numpy()) & (actual <= forecast["upper"].to_numpy()))[
                seen
            ]
        )
    return {
        "mae": float(np.concatenate(model_errors).mean()),
        "naive_mae": float(np.concatenate(naive_errors).mean()),
        "coverage": float(np.concatenate(inside).mean()),
        "weeks": len(models),
        "models": models,
    }


# ---------------------------------------------------------------------------------------------
# The real trace


@pytest.mark.slow
@pytest.mark.skipif(
    not TRACE.exists(), reason=f"real trace not found at {TRACE} (the shared folder is absent)"
)
def test_real_trace_beats_seasonal_naive_with_a_calibrated_interval():
    history, warnings = load_history(TRACE)
    assert any("no value" in w for w in warnings)  # the trace has gaps, and they are reported
    result = weekly_backtest(history)
    print(f"philly: {result}")
    assert result["weeks"] == 7
    assert result["mae"] <= 0.85 * result["naive_mae"], result
    assert 0.85 <= result["coverage"] <= 0.95, result


@pytest.mark.slow
@pytest.mark.skipif(
    not (TRACES / "openb_pod_list_default.csv").exists(),
    reason=f"real traces not found in {TRACES} (the shared folder is absent)",
)
def test_every_real_trace_at_least_matches_seasonal_naive():
    """The judge's protocol (3 weeks in, 168 hours out, an origin a day) on all ten series;
    the held-out four carry the bounds issue 52 sets for series nobody has seen."""
    backtest = runpy.run_path(str(ROOT / "scripts" / "forecast_backtest.py"))
    series = backtest["real_series"](TRACES)
    assert len(series) == 10 and set(backtest["HELD_OUT"]) <= set(series)
    ratios = {}
    for name, values in series.items():
        result = backtest["backtest"](values)
        ratios[name] = result["ratio"]
        assert result["ratio"] <= 1.0, (name, result)
        assert result["coverage"] >= 0.8, (name, result)  # four origins: a noisy estimate
    held = [ratios[name] for name in backtest["HELD_OUT"]]
    assert max(held) <= 1.02 and np.exp(np.mean(np.log(held))) <= 0.87, ratios
    assert np.exp(np.mean(np.log(list(ratios.values())))) <= 0.85, ratios


# ---------------------------------------------------------------------------------------------
# The generated sample


def test_sample_file_is_what_the_generator_writes(generator):
    expected = generator["sample_history"]()
    written = pd.read_csv(SAMPLE)
    assert list(written.columns) == ["timestamp", "requests"]
    assert np.allclose(written["requests"].to_numpy(), expected["requests"].to_numpy())


@pytest.mark.slow
def test_fitted_profile_recovers_the_known_weekly_shape(sample, generator):
    shape = generator["weekly_shape"]()
    forecast = forecast_series(sample, WEEK)
    assert forecast.attrs["members"] == list(MEMBERS)
    assert forecast.attrs["model"].startswith("weighted ")
    assert forecast.index[0].day_of_week == 0 and forecast.index[0].hour == 0  # Monday 00:00
    fitted = forecast["mean"].to_numpy()
    fitted = fitted * shape.mean() / fitted.mean()  # the level wanders; the shape must not
    assert np.corrcoef(fitted, shape)[0, 1] > 0.95  # a weighted copy of last week: its noise too
    assert np.abs(fitted - shape).mean() / shape.mean() < 0.1
    weekday_peak = fitted[:120].reshape(5, 24).mean(axis=0).argmax()
    assert 12 <= weekday_peak <= 16  # the shape peaks at 14:00
    weekend = fitted[120:].mean() / fitted[:120].mean()
    assert 0.5 < weekend < 0.75  # weekend dip of 0.6


@pytest.mark.slow
def test_sample_backtest_beats_seasonal_naive_and_covers_about_90_percent(sample):
    result = weekly_backtest(sample)
    assert result["mae"] <= 0.98 * result["naive_mae"], result
    assert 0.85 <= result["coverage"] <= 0.97, result


def test_forecast_frame_shape_and_order(sample):
    forecast = forecast_series(sample.iloc[: 4 * WEEK], 30, level=0.8)
    assert list(forecast.columns) == ["mean", "lower", "upper", "std"]
    assert len(forecast) == 30
    assert forecast.index[0] == sample.index[4 * WEEK - 1] + pd.Timedelta(hours=1)
    assert (forecast.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    assert (forecast["lower"] <= forecast["mean"]).all()
    assert (forecast["mean"] <= forecast["upper"]).all()
    assert (forecast["std"] > 0).all() and (forecast["lower"] >= 0).all()
    assert SEASONAL_NAIVE in forecast.attrs["backtest_mae"]


def test_wider_level_gives_wider_interval(sample):
    narrow = forecast_series(sample.iloc[: 3 * WEEK], 24, level=0.5)
    wide = forecast_series(sample.iloc[: 3 * WEEK], 24, level=0.95)
    assert np.allclose(narrow["mean"], wide["mean"])
    assert ((wide["upper"] - wide["lower"]) > (narrow["upper"] - narrow["lower"])).all()


def test_short_history_uses_a_daily_only_model_and_says_so(sample):
    text = sample.iloc[: 10 * 24].to_csv()
    history, warnings = load_history(text)
    assert any("less than two weeks" in w for w in warnings)
    forecast = forecast_series(history, 24)
    daily = ["seasonal_naive_day", "smoothed_naive_day", "last_day_level", "daily_profile"]
    assert forecast.attrs["members"] == daily and forecast.attrs["report"].period == 24
    assert set(forecast.attrs["backtest_mae"]) == {*daily, "combined"}


def test_messy_history_is_repaired_and_reported(sample):
    """Sub-hourly, unsorted, duplicated, with gaps: resampled and reported, never a crash."""
    hourly = sample.iloc[: 3 * WEEK]
    quarter = hourly.resample("15min").ffill()
    table = quarter.reset_index()
    table.columns = ["time", "requests"]
    table = pd.concat([table, table.iloc[100:103]])  # duplicated rows
    table = table.drop(table.index[500:700]).sample(frac=1.0, random_state=1)  # gap, unsorted
    history, warnings = load_history(table.to_csv(index=False).encode())
    text = " | ".join(warnings)
    for expected in ("not in time order", "duplicated", "averaged into hours", "no value"):
        assert expected in text
    assert history.index.freq == "h"
    assert history.isna().sum() > 0
    forecast = forecast_series(history, 48)
    assert np.isfinite(forecast.to_numpy()).all()


def test_picks_the_named_or_first_numeric_column():
    rows = ["timestamp,region,requests,latency"]
    rows += [f"2026-01-{1 + h // 24:02d} {h % 24:02d}:00,eu,{100 + h},{h % 7}" for h in range(72)]
    text = "\n".join(rows)
    default, _ = load_history(text)
    assert default.name == "requests" and default.iloc[0] == 100
    chosen, _ = load_history(text, column="latency")
    assert chosen.iloc[8] == 1
    with pytest.raises(ScenarioError, match="no column 'cpu'"):
        load_history(text, column="cpu")


# ---------------------------------------------------------------------------------------------
# Bad histories

HOURS = [f"2026-01-{1 + h // 24:02d} {h % 24:02d}:00" for h in range(48)]
BAD_HISTORIES = [
    # (file text, words the message must contain)
    ("", ["empty"]),  # empty file
    ("timestamp,requests\n", ["no data rows"]),  # header only
    ("timestamp,requests\n2026-01-01 00:00,5\n", ["only one data row"]),  # one row
    (
        "\n".join(["timestamp,requests", *[f"{h},{i}" for i, h in enumerate(HOURS)]]).replace(
            "2026-01-01 05:00,5", "2026-01-01 05:00,lots"
        ),
        ["'requests'", "row 7", "lots"],
    ),
    ("\n".join(["step,requests", *[f"{i},{i}" for i in range(48)]]), ["no timestamps"]),
    (
        "\n".join(["timestamp,requests", *[f"{h},{i}" for i, h in enumerate(HOURS)]]).replace(
            "2026-01-01 03:00", "yesterday"
        ),
        ["row 5", "'yesterday' is not a timestamp"],
    ),
    (
        "\n".join(["timestamp,requests", *[f"{h},{-i}" for i, h in enumerate(HOURS)]]),
        ["negative"],
    ),  # demand below zero
    ("\n".join(["timestamp,requests", *[f"{h},inf" for h in HOURS]]), ["not finite"]),
    ("\n".join(["timestamp", *HOURS]), ["numeric column", "one column, 'timestamp'"]),
    ("hello world", ["numeric column", "one column, 'hello world'"]),  # a text file, not a CSV
    (
        "\n".join(["timestamp,requests", *[f"2026-01-{1 + d:02d},{d}" for d in range(28)]]),
        ["apart", "hourly"],
    ),  # daily rows
    (
        "\n".join(["timestamp,requests", *[f"{h}," for h in HOURS[:30]], f"{HOURS[30]},4"]),
        ["only 1 hours have a value"],
    ),  # nearly all blank
    ('timestamp,requests\n"2026-01-01 00:00,5\n', ["cannot be read as CSV"]),  # broken quote
    (
        "\n".join(["timestamp,requests", *[f"{h},{i}" for i, h in enumerate(HOURS)]])
        + "\n9999-12-31 23:00,1",
        ["span", "hours", "mistyped year"],
    ),  # one far-off stamp: refused before resampling allocates ~70M hours
    (
        "\n".join(["timestamp,requests", *[f"{h},{i}" for i, h in enumerate(HOURS)], "2026"]),
        ["row 50 has 1 of the header's 2 columns ('2026')", "cut short"],
    ),  # a file cut mid-line: "2026" would read as 2026-01-01, a new hour without a value
    (
        "\n".join(["timestamp,requests", *[f"{h},{i}" for i, h in enumerate(HOURS)]]).replace(
            "2026-01-01 04:00,4", "2026-01-01 04:00,1e13"
        ),
        ["'requests'", "row 6", "1e+13 is more than 1e+12"],
    ),
]


@pytest.mark.parametrize(("text", "words"), BAD_HISTORIES)
def test_bad_history_gives_a_clear_error(text, words):
    with pytest.raises(ScenarioError) as caught:
        load_history(text + "\n" if text else text, name="traffic.csv")
    message = str(caught.value)
    assert message.startswith("traffic.csv: ")
    for word in words:
        assert word in message, message


def test_bad_bytes_and_missing_file():
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_history(b"timestamp,requests\n\xff\xfe,1\n", name="traffic.csv")
    with pytest.raises(ScenarioError, match="no such file"):
        load_history(DATA_DIR / "histories" / "absent.csv")


def test_forecast_series_rejects_bad_arguments(sample):
    with pytest.raises(ScenarioError, match="horizon"):
        forecast_series(sample, 0)
    with pytest.raises(ScenarioError, match="level"):
        forecast_series(sample, 24, level=1.0)
    with pytest.raises(ScenarioError, match="at least 24"):
        forecast_series(sample.iloc[:10], 24)


# ---------------------------------------------------------------------------------------------
# The command line (SPEC section 4)


@pytest.mark.slow
def test_cli_forecast_writes_the_table(tmp_path):
    out = tmp_path / "forecast.csv"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "forecast",
            str(SAMPLE),
            "--horizon",
            "36",
            "--level",
            "0.8",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    table = pd.read_csv(out)
    assert list(table.columns) == ["timestamp", "mean", "lower", "upper"]
    assert len(table) == 36 and table["timestamp"].iloc[0] == "2026-07-27T00:00:00"
    direct, _ = forecast_file(SAMPLE, horizon=36, level=0.8)
    assert np.allclose(table["mean"], direct["mean"], atol=1e-3)


@pytest.mark.slow
def test_cli_forecast_bad_history_exits_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,requests\n2026-01-01 00:00,5\n")
    result = subprocess.run(
        [sys.executable, "-m", "core", "forecast", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    progress, error = result.stderr.splitlines()  # what it started, then what is wrong
    assert progress == "forecast: fitting bad.csv ..."
    assert error.startswith("error: bad.csv: ") and "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------
# Coverage risk and GPU paths


@pytest.fixture(scope="module")
def day_forecast(sample) -> pd.DataFrame:
    return forecast_series(sample.iloc[: 5 * WEEK], 24)


def test_coverage_risk_is_monotone_in_the_allocation(day_forecast):
    capacity = 300.0
    previous = np.ones(24)
    for gpus in range(0, 20):
        risk = coverage_risk(day_forecast, np.full(24, gpus), capacity)
        assert ((risk >= 0) & (risk <= 1)).all()
        assert (risk <= previous + 1e-12).all()
        previous = risk
    assert previous.max() < 0.01  # 19 GPUs serve well above the peak
    assert coverage_risk(day_forecast, 0, capacity).min() > 0.99


def test_coverage_risk_matches_the_interval(day_forecast):
    """Holding exactly the upper bound of a 90% interval leaves a 5% risk of shortfall."""
    capacity = 100.0
    risk = coverage_risk(day_forecast, day_forecast["upper"].to_numpy() / capacity, capacity)
    assert np.allclose(risk, 0.05, atol=1e-6)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.floats(0, 40, allow_nan=False), min_size=1, max_size=48),
    st.integers(0, 6),
    st.integers(0, 16),
    st.integers(0, 5),
    st.one_of(st.none(), st.integers(0, 25)),
)
def test_gpu_path_respects_range_and_swap_cap(target, gpus_min, extra, swap_cap, previous):
    gpus_max = gpus_min + extra
    path = gpu_path(target, gpus_min, gpus_max, swap_cap, previous)
    assert path.dtype.kind == "i" and len(path) == len(target)
    steps = np.diff(path) if previous is None else np.diff(np.concatenate([[previous], path]))
    assert (np.abs(steps) <= swap_cap).all()
    if previous is None or gpus_min <= previous <= gpus_max:
        assert ((path >= gpus_min) & (path <= gpus_max)).all()
    need = np.clip(np.ceil(np.round(target, 9)), gpus_min, gpus_max)
    if previous is None:
        assert (path >= need).all()  # with step 0 free, every reachable target is covered
        # and no constant path above the target does better on surplus
        assert path.sum() <= max(need.max(), 0) * len(path)


def test_gpu_path_covers_peaks_by_ramping_early():
    path = gpu_path([1, 1, 1, 7, 1, 1], gpus_min=1, gpus_max=8, swap_cap=2, previous=1)
    assert path.tolist() == [1, 3, 5, 7, 5, 3]
    frozen = gpu_path([1, 4, 2], gpus_min=0, gpus_max=8, swap_cap=0)
    assert frozen.tolist() == [4, 4, 4]
    held = gpu_path([1, 4, 2], gpus_min=0, gpus_max=8, swap_cap=0, previous=3)
    assert held.tolist() == [3, 3, 3]


def test_gpu_path_from_a_forecast(day_forecast):
    capacity = 400.0
    target = gpus_needed(demand_quantile(day_forecast, 0.9), capacity)
    path = gpu_path_from_forecast(day_forecast, capacity, 0.9, 1, 12, 2, previous=4)
    same = gpu_path(
        demand_quantile(day_forecast, 0.9), 1, 12, 2, previous=4, capacity_per_gpu=capacity
    )
    assert path.tolist() == same.tolist()
    assert (np.abs(np.diff(np.concatenate([[4], path]))) <= 2).all()
    assert (path >= np.minimum(target, 12)).mean() > 0.8
    risk = coverage_risk(day_forecast, path, capacity)
    covered = path >= target
    assert (risk[covered] <= 0.1 + 1e-9).all()


CELLS = st.one_of(
    st.floats(-5, 1e6).map(str),
    st.sampled_from(["nan", "inf", "-inf"]),
    st.integers(0, 10**6).map(str),
    st.sampled_from(["", "NaN", "abc", "1e3", " 7 "]),
    st.text(alphabet='0123456789-:,. TZabc"', max_size=12),
)
STAMPS = st.one_of(
    st.datetimes(
        min_value=pd.Timestamp("2020-01-01").to_pydatetime(),
        max_value=pd.Timestamp("2020-03-01").to_pydatetime(),
    ).map(str),
    st.sampled_from(["", "yesterday", "2020-13-01", "12", "2020-01-01T00:00:00Z"]),
)


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.tuples(STAMPS, CELLS), min_size=0, max_size=60), st.booleans())
def test_any_history_file_loads_or_gives_a_scenario_error(rows, hourly):
    """Never a crash: random files either load into an hourly float series or are refused."""
    if hourly and rows:  # a plausible base so some examples get past the checks
        rows = [
            (str(pd.Timestamp("2020-01-01") + pd.Timedelta(hours=i)), cell)
            for i, (_, cell) in enumerate(rows)
        ]
    text = "\n".join(["timestamp,value", *[f"{stamp},{cell}" for stamp, cell in rows]])
    try:
        history, warnings = load_history(text + "\n", name="fuzz.csv")
    except ScenarioError as e:
        assert str(e).startswith("fuzz.csv: ")
        return
    assert history.index.freq == "h" and history.dtype == float
    assert (history.dropna() >= 0).all() and np.isfinite(history.dropna()).all()
    assert all(isinstance(w, str) for w in warnings)


def test_forecast_series_handles_short_and_sub_hourly_series():
    index = pd.date_range("2026-01-01", periods=30, freq="h")
    short = forecast_series(pd.Series(np.linspace(10, 20, 30), index=index), 6)
    assert short.attrs["model"] == "level" and short.attrs["warnings"]
    assert np.isfinite(short.to_numpy()).all() and (short["std"] > 0).all()
    quarter = pd.Series(
        np.tile([1.0, 2.0, 3.0, 4.0], 24 * 20),
        index=pd.date_range("2026-01-01", periods=4 * 24 * 20, freq="15min"),
    )
    hourly = forecast_series(quarter, 3)
    assert hourly.index[0] == pd.Timestamp("2026-01-21 00:00")  # whole hours after the data
    assert np.allclose(hourly["mean"], 2.5, atol=0.05)  # each hour averages to 2.5


# ---------------------------------------------------------------------------------------------
# Robustness: outages, level shifts, trends (synthetic weeks with a known pattern)


def _pattern(hours: int, start: int = 0) -> np.ndarray:
    """A weekday/weekend daily shape around 100, peaking mid-afternoon."""
    t = np.arange(start, start + hours)
    day = 1 + 0.5 * np.sin(2 * np.pi * (t % 24 - 8) / 24)
    weekend = np.where((t // 24) % 7 >= 5, 0.6, 1.0)
    return 100 * day * weekend


def _weeks(values: np.ndarray) -> pd.Series:
    return pd.Series(values, index=pd.date_range("2026-03-02", periods=len(values), freq="h"))


@pytest.fixture(scope="module")
def noisy_weeks() -> np.ndarray:
    return _pattern(3 * WEEK) + np.random.default_rng(3).normal(0, 3, 3 * WEEK)


@pytest.mark.slow
def test_an_outage_leaves_no_dip_a_week_later_and_no_wider_band(noisy_weeks):
    broken = noisy_weeks.copy()
    broken[400:412] = 0.0  # 12 hours down on Wednesday of the last week
    forecast, report = forecast_series(_weeks(broken), WEEK, report=True)
    clean = forecast_series(_weeks(noisy_weeks), WEEK)
    truth = _pattern(WEEK, 3 * WEEK)
    ghost = slice(400 - 2 * WEEK, 412 - 2 * WEEK)  # the same hours next week
    assert (forecast["mean"].to_numpy()[ghost] >= 0.9 * truth[ghost]).all()
    width = (forecast["upper"] - forecast["lower"]).mean()
    assert width <= 1.1 * (clean["upper"] - clean["lower"]).mean()
    (outage,) = report.anomalies
    assert (outage.kind, outage.hours) == ("outage", 12)
    assert outage.start == _weeks(broken).index[400]
    assert any("outage" in line for line in report.lines())
    assert any("12 hours" in w for w in forecast.attrs["warnings"])


def test_a_spike_is_repaired_and_quiet_hours_that_recur_are_not(noisy_weeks):
    spiky = noisy_weeks.copy()
    spiky[300:302] += 400.0  # a two-hour burst four times the level
    _, report = forecast_series(_weeks(spiky), WEEK, report=True)
    assert [(a.kind, a.hours) for a in report.anomalies] == [("spike", 2)]
    habit = noisy_weeks.copy()
    for week in range(3):  # idle every Sunday night: a habit, not an outage
        habit[week * WEEK + 144 : week * WEEK + 150] = 0.0
    _, report = forecast_series(_weeks(habit), WEEK, report=True)
    assert report.anomalies == ()


def test_a_level_shift_is_followed_part_of_the_way_within_a_day(noisy_weeks):
    """The last day runs 40 above the pattern: the next day's forecast moves towards it (the
    level member and the error correction) and beats last week's values there."""
    shifted = noisy_weeks.copy()
    shifted[-24:] += 40.0
    forecast = forecast_series(_weeks(shifted), WEEK)
    next_day = forecast["mean"].to_numpy()[:24]
    truth = _pattern(24, 3 * WEEK) + 40.0
    unshifted = forecast_series(_weeks(noisy_weeks), WEEK)["mean"].to_numpy()[:24]
    assert next_day.mean() - unshifted.mean() >= 0.25 * 40.0  # at least a quarter of the shift
    naive = noisy_weeks[-WEEK : -WEEK + 24]  # what the same hours last week would say
    assert np.abs(next_day - truth).mean() < 0.8 * np.abs(naive - truth).mean()


@pytest.mark.slow
@pytest.mark.parametrize("factor", [1.5, 2.0, 0.6])
def test_a_level_shift_by_a_factor_moves_the_next_day_its_way(noisy_weeks, factor):
    shifted = noisy_weeks.copy()
    shifted[-24:] *= factor
    next_day = forecast_series(_weeks(shifted), WEEK)["mean"].to_numpy()[:24]
    before = forecast_series(_weeks(noisy_weeks), WEEK)["mean"].to_numpy()[:24]
    truth = _pattern(24, 3 * WEEK) * factor
    assert np.sign(next_day.mean() - before.mean()) == np.sign(factor - 1)
    naive = noisy_weeks[-WEEK : -WEEK + 24]  # the same hours last week, before the shift
    assert np.abs(next_day - truth).mean() < 0.9 * np.abs(naive - truth).mean()


@pytest.mark.slow
def test_a_steady_trend_is_no_worse_than_last_week():
    """4% a week: the members carry no trend, and the forecast is within a hair of seasonal
    naive there (the level member follows the last day, the profile lags)."""
    growth = 1.04 ** (np.arange(4 * WEEK) / WEEK)
    noise = np.random.default_rng(5).normal(0, 3, 3 * WEEK)
    history = _pattern(3 * WEEK) * growth[: 3 * WEEK] + noise
    forecast = forecast_series(_weeks(history), WEEK)
    truth = _pattern(WEEK, 3 * WEEK) * growth[3 * WEEK :]
    mean = forecast["mean"].to_numpy()
    assert abs(mean.mean() / truth.mean() - 1) <= 0.05
    assert np.abs(mean - truth).mean() <= 1.05 * np.abs(history[-WEEK:] - truth).mean()


@pytest.mark.parametrize("sd", [1.0, 5.0, 15.0])
def test_a_clean_weekly_pattern_is_not_lost_to_seasonal_naive(sd):
    """Pattern plus white noise: seasonal naive is nearly right, and the weights must see it."""
    rng = np.random.default_rng(int(sd))
    ratios = []
    for _ in range(4):
        values = _pattern(4 * WEEK) + rng.normal(0, sd, 4 * WEEK)
        mean = forecast_series(_weeks(values[: 3 * WEEK]), WEEK)["mean"].to_numpy()
        actual = values[3 * WEEK :]
        naive = values[2 * WEEK : 3 * WEEK]
        ratios.append(np.abs(mean - actual).mean() / np.abs(naive - actual).mean())
    assert np.mean(ratios) <= 1.01, ratios


@pytest.mark.parametrize(
    ("law", "level"), [("normal", 0.9), ("normal", 0.5), ("laplace", 0.9), ("laplace", 0.5)]
)
def test_the_interval_holds_about_its_level_on_a_known_noise_law(law, level):
    """Pattern plus noise of a known law: the share of next-week hours inside the interval is
    near `level`, pooled over 12 draws. On the wide side by design: the half-width is at least
    1.15x seasonal naive's own error quantile, which real series need and white noise does not
    (the combination beats seasonal naive by averaging)."""
    rng = np.random.default_rng(11)
    inside = []
    for _ in range(12):
        noise = rng.normal(0, 5, 4 * WEEK) if law == "normal" else rng.laplace(0, 3.5, 4 * WEEK)
        values = _pattern(4 * WEEK) + noise
        forecast = forecast_series(_weeks(values[: 3 * WEEK]), WEEK, level)
        actual = values[3 * WEEK :]
        inside.append((forecast["lower"] <= actual) & (actual <= forecast["upper"]))
    coverage = float(np.mean(inside))
    assert level - 0.03 <= coverage <= level + (0.08 if level > 0.8 else 0.16), coverage


def test_an_all_zero_history_is_forecast_zero_with_no_width():
    forecast, report = forecast_series(_weeks(np.zeros(3 * WEEK)), WEEK, report=True)
    assert np.allclose(forecast[["mean", "lower", "upper"]].to_numpy(), 0.0, atol=1e-6)
    assert np.isfinite(forecast.to_numpy()).all() and report.anomalies == ()


def test_a_two_hour_history_is_refused_with_the_count():
    two = pd.Series([3.0, 4.0], index=pd.date_range("2026-03-02", periods=2, freq="h"))
    with pytest.raises(ScenarioError, match="history has 2 hourly values; at least 24"):
        forecast_series(two, WEEK)


@given(
    cap=st.floats(0, 200),
    level=st.sampled_from([0.5, 0.9, 0.99]),
    hours=st.sampled_from([30, 100, 3 * WEEK]),
    horizon=st.sampled_from([1, 24, WEEK, 2 * WEEK]),
)
@settings(max_examples=examples(25), deadline=None)
def test_max_bounds_every_output(noisy_weeks, cap, level, hours, horizon):
    history = _weeks(noisy_weeks[-hours:] * 1.5)
    forecast = forecast_series(history, horizon, level, cap=cap)
    bounded = forecast[["mean", "lower", "upper"]].to_numpy()
    assert (bounded >= 0).all() and (bounded <= cap + 1e-9).all()
    assert (forecast["lower"] <= forecast["mean"]).all()
    assert (forecast["mean"] <= forecast["upper"]).all()
    assert forecast.attrs["report"].cap == cap


@pytest.mark.parametrize("cap", [-1, float("nan"), float("inf"), "8", True])
def test_a_bad_max_is_refused(noisy_weeks, cap):
    with pytest.raises(ScenarioError, match="max must be"):
        forecast_series(_weeks(noisy_weeks), 24, cap=cap)


def test_report_says_the_winner_the_backtest_and_the_measured_coverage(noisy_weeks):
    _, report = forecast_series(_weeks(noisy_weeks), WEEK, report=True)
    # a clean weekly pattern: last week's values (smoothed or not) carry the weight
    weekly = (SEASONAL_NAIVE, "smoothed_naive_week")
    assert report.winner.startswith(weekly)
    for _, shares in report.weights:
        assert abs(sum(shares.values()) - 1) < 1e-9
        assert sum(shares[m] for m in weekly) >= 0.8, shares
    naive = report.backtest_mae[SEASONAL_NAIVE]
    assert report.backtest_ratio == pytest.approx(report.backtest_mae["combined"] / naive)
    assert 0.5 <= report.measured_coverage <= 1.0
    text = "\n".join(report.lines())
    assert "most weight: s" in text and "of the weight)" in text
    assert "against seasonal naive's" in text and "measured on this history" in text
    # the page's one sentence carries the same three figures
    headline = report.headline()
    assert headline.startswith(f"most weight on {report.winner}")
    assert f"{report.backtest_ratio:.2f}x seasonal naive's" in headline
    assert f"held {report.measured_coverage:.0%} of hours" in headline


@pytest.mark.slow
def test_report_names_the_members_and_the_interval(sample):
    forecast, report = forecast_series(sample.iloc[: 4 * WEEK], 48, report=True)
    assert isinstance(report, ForecastReport) and forecast.attrs["report"] == report
    assert report.members == MEMBERS
    assert report.calibration_origins >= 2 and "split-conformal" in report.interval
    assert set(report.backtest_mae) == {*MEMBERS, "combined"}
    lines = report.lines()
    assert lines[0] == f"model: weighted {' + '.join(MEMBERS)}"
    table, _ = forecast_file(SAMPLE, horizon=24)
    assert table.attrs["report"].members == report.members


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"horizon": MAX_HORIZON_HOURS + 1}, "horizon"),  # would allocate without bound
        ({"horizon": 24, "level": 1e-300}, "level"),  # z of 1e-300 is 0: divides by zero
        ({"horizon": 24, "level": float("nan")}, "level"),
    ],
)
def test_forecast_series_refuses_unbounded_or_degenerate_requests(sample, kwargs, words):
    with pytest.raises(ScenarioError, match=words):
        forecast_series(sample, **kwargs)


def test_a_constant_history_is_forecast_constant():
    forecast = forecast_series(_weeks(np.full(3 * WEEK, 7.0)), 24)
    assert np.allclose(forecast["mean"], 7.0)
    assert np.isfinite(forecast.to_numpy()).all() and (forecast["std"] > 0).all()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--horizon", "100000000"], "--horizon"),  # issue 11: grew to 23 GB
        (["--horizon", "0"], "--horizon"),
        (["--level", "1e-300"], "--level"),  # issue 11: divided by zero
        (["--level", "1"], "--level"),
        (["--level", "nan"], "--level"),
    ],
)
def test_cli_forecast_refuses_bad_horizon_and_level_in_one_line(flags, words):
    result = subprocess.run(
        [sys.executable, "-m", "core", "forecast", str(SAMPLE), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


@pytest.mark.slow
def test_cli_forecast_reports_members_and_anomalies_on_stderr(tmp_path, noisy_weeks):
    broken = noisy_weeks.copy()
    broken[400:412] = 0.0
    history = tmp_path / "down.csv"
    _weeks(broken).rename("requests").rename_axis("timestamp").to_csv(history)
    result = subprocess.run(
        [sys.executable, "-m", "core", "forecast", str(history), "--horizon", "24"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("forecast: fitting ") and lines[0].endswith(" ...")  # at once
    assert f"forecast: model: weighted {' + '.join(MEMBERS)}" in lines
    assert any(line.startswith("forecast: backtest at ") for line in lines)
    assert any(line.startswith("forecast: interval coverage measured") for line in lines)
    assert any(line.startswith("warning: 12 hours") and "outage" in line for line in lines)
    assert any(line.startswith("forecast: interval: split-conformal") for line in lines)
    assert len(pd.read_csv(io.StringIO(result.stdout))) == 24


@pytest.mark.slow
def test_a_short_horizon_is_the_start_of_the_day_ahead_forecast():
    # a few lead hours alone give too few refit errors to calibrate a band on
    history, _ = load_history(SAMPLE)
    short, day = forecast_series(history, 3, 0.9), forecast_series(history, 24, 0.9)
    assert short.index.equals(day.index[:3])
    assert np.allclose(short[["mean", "lower", "upper"]], day[["mean", "lower", "upper"]][:3])


def test_a_history_with_an_offset_is_forecast_at_that_offset(tmp_path):
    index = pd.date_range("2026-08-01", periods=24 * 21, freq="h", tz="+02:00")
    values = 10 + 3 * np.sin(np.arange(len(index)) * 2 * np.pi / 24)
    path = tmp_path / "local.csv"
    stamps = [t.isoformat() for t in index]
    pd.DataFrame({"timestamp": stamps, "requests": values}).to_csv(path, index=False)
    table, _ = forecast_file(path, horizon=3)
    assert list(table["timestamp"]) == [
        "2026-08-22T00:00:00+02:00",
        "2026-08-22T01:00:00+02:00",
        "2026-08-22T02:00:00+02:00",
    ]
    mixed = tmp_path / "mixed.csv"
    stamps[0] = index[0].tz_convert("UTC").isoformat()
    pd.DataFrame({"timestamp": stamps, "requests": values}).to_csv(mixed, index=False)
    assert not str(forecast_file(mixed, horizon=1)[0]["timestamp"].iloc[0]).endswith("+02:00")
