"""Scheduler histories -> a Scenario for a window, plus what really ran in it ("as-run").

Every history format (sacct, openb, kubectl, Helios, Acme) is read by its own module into one
job table (`TABLE_COLUMNS`, times in seconds on the trace's own axis); `import_table` maps that
table to a scenario with vectorised pandas/numpy: no per-row Python on the hot path, so a
million-job export imports in seconds.

The mapping (README, "Importing a scheduler history"):
- batch jobs submitted in the window arrive at floor((submit - start) / step); jobs submitted
  before it and still waiting arrive at step 0; jobs running at the window start are pinned as
  `running` on aligned blocks packed largest first, with their remaining steps from the real end;
- a job's block is its GPU count rounded up to a power of two, and its `gpu_hours` are that
  block times its real run time (so its planned duration is its real one); the time limit is
  the estimate where it never finished;
- real-time jobs become one elastic job per rule group whose demand is the time-weighted GPUs
  they held per step (half a step = 0.5, a shared GPU its share), with up to four weeks of the
  same series before the window as `history`.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..model import (
    BATCH_TYPES,
    JOB_TYPES,
    MAX_GPUS,
    MAX_NUMBER,
    MAX_STEPS,
    REALTIME_TYPE,
    BatchJob,
    Cluster,
    RealtimeJob,
    Running,
    Scenario,
    ScenarioError,
)
from .text import json_error, os_errors, read_text

HISTORY_FORMATS = ("slurm", "openb", "kubectl", "helios", "acme")
MAX_HISTORY_BYTES = 2 * 1024**3  # exports are large (the app takes MAX_HISTORY_UPLOAD_MB)
SNIFF_BYTES = 8192
HOUR = 3600.0
DAY = 86400.0

# The job table every format module produces (strings "" where unknown, floats NaN).
TABLE_COLUMNS = (
    "row",  # line in the source file (header = 1) or item number, for messages
    "job_id",
    "name",
    "user",
    "team",
    "partition",
    "qos",
    "priority_class",
    "workload",  # Acme's `type`
    "gpus",  # GPUs held; a share of one GPU for GPU-sharing pods
    "submit",
    "start",
    "end",
    "time_limit",  # seconds
    "priority_raw",  # a scheduler's numeric priority, ranked into 1..10
    "state",
)
TEXT_COLUMNS = TABLE_COLUMNS[1:9] + ("state",)
RULE_FIELDS = ("name", "user", "team", "partition", "qos", "priority_class", "workload", "state")

AS_RUN_NOTE = (
    "as-run is what the trace's own start and end times say ran in the window; real placements "
    "are not aligned blocks, so it is not a legal grid of the model and is not checked as one"
)


# ---------------------------------------------------------------------------------------------
# Window and rules


@dataclass(frozen=True)
class ImportWindow:
    """The period to plan: `start` is an ISO time, or hours from the trace start for traces with
    relative times (openb); None picks the day holding the median submit time."""

    start: str | float | datetime | None = None
    days: float = 1.0
    step_minutes: int = 60
    gpus: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.days, int | float) and math.isfinite(self.days) and self.days > 0):
            raise ScenarioError(f"window: days must be a number > 0, got {self.days!r}")
        if not isinstance(self.step_minutes, int) or not 1 <= self.step_minutes <= 7 * 24 * 60:
            raise ScenarioError(
                f"window: step_minutes must be a whole number of minutes, got {self.step_minutes!r}"
            )
        steps = self.days * 24 * 60 / self.step_minutes
        if steps > MAX_STEPS:  # before any array of the window's steps is made
            raise ScenarioError(
                f"window: {self.days:g} days of {self.step_minutes}-minute steps is {steps:,.0f} "
                f"steps, more than the limit of {MAX_STEPS:,} (7 days of 1-minute steps, 420 "
                "of 60-minute steps)"
            )
        if abs(steps - round(steps)) > 1e-9:
            raise ScenarioError(
                f"window: {self.days:g} days is not a whole number of {self.step_minutes}-minute "
                "steps"
            )
        if self.gpus is not None and (
            not isinstance(self.gpus, int) or not 1 <= self.gpus <= MAX_GPUS
        ):
            raise ScenarioError(f"window: gpus must be a whole number in 1..{MAX_GPUS}")

    @property
    def steps(self) -> int:
        return round(self.days * 24 * 60 / self.step_minutes)

    @property
    def step_seconds(self) -> float:
        return self.step_minutes * 60.0


@dataclass(frozen=True)
class TypeRule:
    """Jobs whose `fields` match `pattern` (case-insensitive regular expression) get `type`;
    real-time jobs are grouped by `group`, or by the matched value (the matched text for names)."""

    type: str
    fields: tuple[str, ...]
    pattern: str
    group: str | None = None


@dataclass(frozen=True)
class PriorityRule:
    fields: tuple[str, ...]
    pattern: str
    priority: float


_WORDS = ("partition", "name", "workload")
DEFAULT_TYPE_RULES = (
    TypeRule(REALTIME_TYPE, ("partition", "name"), "serv|infer|online|realtime"),
    TypeRule(REALTIME_TYPE, ("qos",), "^LS$", "LS"),
    TypeRule("quantization", _WORDS, "quant|awq|gptq|bnb"),
    TypeRule("batch_inference", _WORDS, "eval|batch|embed|offline"),
)
DEFAULT_PRIORITY_RULES = (
    PriorityRule(("qos", "priority_class"), "^LS$|high|urgent|critical|prod", 8),
    PriorityRule(("qos", "priority_class"), "low|^BE$|best.?effort|scavenger|preempt|spot", 2),
)


@dataclass(frozen=True)
class ImportRules:
    """How trace fields map to job type and priority (first matching rule wins)."""

    type_rules: tuple[TypeRule, ...] = DEFAULT_TYPE_RULES
    default_type: str = "training"
    priority_rules: tuple[PriorityRule, ...] = DEFAULT_PRIORITY_RULES
    rank_priority: bool = True  # a numeric scheduler priority, ranked into 1..10
    default_priority: float = 5.0
    swap_cap: int | None = None  # real-time swap cap; None: the cluster size (the trace had none)
    history_days: float = 28.0

    def __post_init__(self) -> None:
        where = "rules"
        for i, rule in enumerate(self.type_rules):
            if rule.type not in JOB_TYPES:
                raise ScenarioError(
                    f"{where}: types[{i}]: type {rule.type!r} is not one of {JOB_TYPES}"
                )
            _check_rule(f"{where}: types[{i}]", rule.fields, rule.pattern)
        for i, rule in enumerate(self.priority_rules):
            _check_rule(f"{where}: priorities[{i}]", rule.fields, rule.pattern)
            if not (isinstance(rule.priority, int | float) and rule.priority > 0):
                raise ScenarioError(f"{where}: priorities[{i}]: priority must be a number > 0")
        if self.default_type not in BATCH_TYPES:
            raise ScenarioError(f"{where}: default_type must be one of {BATCH_TYPES}")
        if not (isinstance(self.default_priority, int | float) and self.default_priority > 0):
            raise ScenarioError(f"{where}: default_priority must be a number > 0")
        if self.swap_cap is not None and (not isinstance(self.swap_cap, int) or self.swap_cap < 0):
            raise ScenarioError(f"{where}: swap_cap must be a whole number >= 0 or null")
        if not (isinstance(self.history_days, int | float) and 0 <= self.history_days <= 366):
            raise ScenarioError(f"{where}: history_days must be a number in 0..366")

    @classmethod
    def from_json(cls, text: str, name: str = "rules.json") -> ImportRules:
        """Rules from JSON; keys left out keep their defaults (`types`, `priorities` replace the
        default lists)."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise json_error(name, e) from None
        if not isinstance(raw, dict):
            raise ScenarioError(f"{name}: must be a JSON object")
        known = {
            "types",
            "default_type",
            "priorities",
            "rank_priority",
            "default_priority",
            "swap_cap",
            "history_days",
        }
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ScenarioError(f"{name}: unknown key {unknown[0]!r} (known: {sorted(known)})")
        kwargs: dict[str, Any] = {k: raw[k] for k in raw if k not in ("types", "priorities")}
        try:
            if "types" in raw:
                kwargs["type_rules"] = tuple(
                    TypeRule(r["type"], _field_list(r["fields"]), r["pattern"], r.get("group"))
                    for r in _rule_list(raw["types"])
                )
            if "priorities" in raw:
                kwargs["priority_rules"] = tuple(
                    PriorityRule(_field_list(r["fields"]), r["pattern"], r["priority"])
                    for r in _rule_list(raw["priorities"])
                )
            return cls(**kwargs)
        except KeyError as e:
            raise ScenarioError(f"{name}: a rule lacks the key {e.args[0]!r}") from None
        except (TypeError, AttributeError):
            raise ScenarioError(
                f"{name}: each rule must be an object with fields, pattern and type/priority"
            ) from None
        except ScenarioError as e:
            raise e.with_prefix(name) from None

    @classmethod
    def load(cls, path: str | Path) -> ImportRules:
        path = Path(path)
        return cls.from_json(read_text(path), path.name)  # (at most 20 MB, errors by name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "types": [
                {"type": r.type, "fields": list(r.fields), "pattern": r.pattern}
                | ({"group": r.group} if r.group else {})
                for r in self.type_rules
            ],
            "default_type": self.default_type,
            "priorities": [
                {"fields": list(r.fields), "pattern": r.pattern, "priority": r.priority}
                for r in self.priority_rules
            ],
            "rank_priority": self.rank_priority,
            "default_priority": self.default_priority,
            "swap_cap": self.swap_cap,
            "history_days": self.history_days,
        }


def _rule_list(value: Any) -> list[dict]:
    if not isinstance(value, list):
        raise TypeError
    return value


def _field_list(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _check_rule(where: str, rule_fields: tuple[str, ...], pattern: str) -> None:
    bad = [f for f in rule_fields if f not in RULE_FIELDS]
    if not rule_fields or bad:
        raise ScenarioError(f"{where}: fields must be among {RULE_FIELDS}, got {list(rule_fields)}")
    try:
        re.compile(pattern)
    except (re.error, TypeError) as e:
        raise ScenarioError(
            f"{where}: pattern {pattern!r} is not a regular expression ({e})"
        ) from None


# ---------------------------------------------------------------------------------------------
# What format modules hand over


@dataclass
class TraceInfo:
    """About the trace as a whole: where times come from and what was dropped while reading."""

    name: str
    format: str
    relative: bool = False  # times are seconds from the trace start (openb), not epoch seconds
    end: float = math.nan  # the export time: the latest timestamp in the trace
    rows: int = 0
    cluster_gpus: int | None = None  # from a node list, where the format has one
    utc_offset: float = 0.0  # seconds the trace's wall-clock times are ahead of UTC
    dropped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImportResult:
    scenario: Scenario
    as_run: dict[str, Any]
    summary: dict[str, Any]


def empty_table(n: int) -> pd.DataFrame:
    """A job table of n rows with every column at its 'unknown' value."""
    blank = pd.Series(pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""])).astype("str")
    out = {c: blank.copy() for c in TEXT_COLUMNS}
    for c in ("gpus", "submit", "start", "end", "time_limit", "priority_raw"):
        out[c] = np.full(n, np.nan)
    out["row"] = np.arange(n, dtype=np.int64)
    return pd.DataFrame(out)[list(TABLE_COLUMNS)]


# ---------------------------------------------------------------------------------------------
# Reading helpers shared by the format modules


def as_text(source: str | bytes | Path) -> str:
    """The text of a history given directly (an upload's bytes are decoded as UTF-8)."""
    if isinstance(source, bytes):
        try:
            return source.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ScenarioError(f"is not UTF-8 text (byte {e.start} cannot be read)") from None
    return str(source)


def is_path(source: str | bytes | Path) -> bool:
    return isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and len(source) < 4096
    )


def read_source(
    source: str | bytes | Path, name: str | None = None
) -> tuple[str, Path | None, str]:
    """(display name, path or None, head text) of a path, or of the text (or bytes) itself."""
    if is_path(source):
        path = Path(source)
        with os_errors(path):
            size = path.stat().st_size
            if size > MAX_HISTORY_BYTES:
                raise ScenarioError(
                    f"{path.name}: file is {size / 1e9:.1f} GB, larger than the import limit of "
                    f"{MAX_HISTORY_BYTES / 1e9:.1f} GB"
                )
            if size == 0:
                raise ScenarioError(f"{path.name}: file is empty")
            with path.open("rb") as f:
                head = f.read(SNIFF_BYTES).decode("utf-8-sig", errors="replace")
        return name or path.name, path, head
    try:
        text = as_text(source)
    except ScenarioError as e:
        raise e.with_prefix(name or "history") from None
    if not text.strip():
        raise ScenarioError(f"{name or 'history'}: file is empty")
    return name or "history", None, text[:SNIFF_BYTES]


def read_delimited(
    source: str | bytes | Path,
    name: str | None,
    sep: str = ",",
    keep: Callable[[str], bool] | None = None,
) -> tuple[pd.DataFrame, str]:
    """All cells as strings ("" where empty), with the header stripped; (frame, display name).

    pyarrow's multithreaded reader does the parsing (a 250 MB export in seconds); a file it
    rejects is read again by pandas only to name the row that breaks it.
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    shown, path, head = read_source(source, name)
    columns = [c for c in header_of(head, sep)]
    raw = path if path is not None else io.BytesIO(as_text(source).encode("utf-8"))
    try:
        table = pacsv.read_csv(
            raw,
            read_options=pacsv.ReadOptions(encoding="utf8"),
            parse_options=pacsv.ParseOptions(delimiter=sep),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in columns},
                strings_can_be_null=False,
                include_columns=[c for c in columns if c and keep(c)] if keep else None,
            ),
        )
    except pa.ArrowInvalid as e:
        raise ScenarioError(f"{shown}: {_where_broken(source, path, sep, str(e))}") from None
    frame = table.to_pandas()
    frame.columns = [str(c).strip().lstrip("\ufeff") for c in frame.columns]
    # `sacct -p` ends every line with the separator: an empty, unnamed last column
    frame = frame.loc[:, [c for c in frame.columns if c]]
    return frame, shown


def _where_broken(source: str | bytes | Path, path: Path | None, sep: str, message: str) -> str:
    """The first row whose cell count differs from the header's (only on this error path is
    the file walked row by row)."""
    import csv
    import io

    try:
        handle = (
            path.open(encoding="utf-8-sig", newline="")
            if path is not None
            else io.StringIO(as_text(source), newline="")
        )
        with handle:
            reader = csv.reader(handle, delimiter=sep)
            width = len(next(reader, []))
            for cells in reader:
                if cells and len(cells) != width:
                    return f"row {reader.line_num}: has {len(cells)} cells, the header has {width}"
    except UnicodeDecodeError as e:
        return f"is not UTF-8 text (byte {e.start} of a line cannot be read)"
    except (csv.Error, OSError):
        pass
    if "utf8" in message.lower():
        return "is not UTF-8 text"
    return f"cannot be read as a table ({message.removeprefix('CSV parse error: ')})"


def header_of(head: str, sep: str = ",") -> list[str]:
    first = head.lstrip("\ufeff").splitlines()[0] if head.strip() else ""
    return [c.strip().strip('"') for c in first.split(sep)]


def require_columns(frame: pd.DataFrame, name: str, groups: list[tuple[str, ...]]) -> None:
    """Each group is one required column, or alternatives of which one must be present."""
    for group in groups:
        if not any(c in frame.columns for c in group):
            what = group[0] if len(group) == 1 else " or ".join(group)
            raise ScenarioError(
                f"{name}: missing column {what} (the header has {', '.join(frame.columns)})"
            )


def first_bad(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def parse_numbers(
    values: pd.Series,
    name: str,
    field_name: str,
    rows: np.ndarray,
    *,
    missing: tuple[str, ...] = ("",),
    minimum: float | None = 0.0,
    maximum: float = MAX_NUMBER,
) -> np.ndarray:
    """Floats (NaN for the missing tokens); anything else unreadable, below `minimum` or above
    `maximum` in size (every number a file gives is at most 1e15) raises, naming the row."""
    text = values.astype("str").str.strip()
    absent = text.isin(missing).to_numpy()
    numbers = _to_floats(text.where(~absent, "nan"))
    bad = first_bad(~absent & ~np.isfinite(numbers))
    if bad is not None:
        raise ScenarioError(
            f"{name}: row {rows[bad]}: {field_name} must be a number, got {text.iloc[bad]!r}"
        )
    bad = first_bad(~absent & (np.abs(numbers) > maximum))
    if bad is not None:
        limit = "1e15" if maximum == MAX_NUMBER else f"{maximum:,.0f}"
        raise ScenarioError(
            f"{name}: row {rows[bad]}: {field_name} {text.iloc[bad]} is more than {limit} in size"
        )
    if minimum is not None:
        bad = first_bad(~absent & (numbers < minimum))
        if bad is not None:
            raise ScenarioError(
                f"{name}: row {rows[bad]}: {field_name} must be >= {minimum:g}, "
                f"got {text.iloc[bad]!r}"
            )
    return numbers


def _to_floats(text: pd.Series) -> np.ndarray:
    """pyarrow's cast where every cell is a number; pandas (NaN for the rest) where not."""
    import pyarrow as pa

    try:
        return pa.array(text).cast(pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)


_FAST_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S")


def parse_times(
    values: pd.Series,
    name: str,
    field_name: str,
    rows: np.ndarray,
    *,
    missing: tuple[str, ...] = ("", "Unknown", "None", "N/A"),
) -> np.ndarray:
    """Epoch seconds (NaN for the missing tokens); an unreadable time raises naming its row.

    Naive times are read as they stand; times with an offset are converted to UTC. The common
    layouts go through pyarrow's strptime; only what it cannot read goes to pandas.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    text = values.astype("str").str.strip()
    absent = text.isin(missing).to_numpy()
    seconds = np.full(len(text), np.nan)
    todo = ~absent
    arrow = pa.array(text)
    for fmt in _FAST_TIME_FORMATS:
        if not todo.any():
            break
        parsed = pc.strptime(arrow, format=fmt, unit="s", error_is_null=True)
        got = parsed.is_valid().to_numpy(zero_copy_only=False) & todo
        stamps = parsed.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        seconds[got] = stamps[got].astype(float)
        todo &= ~got
    if todo.any():
        rest = text[todo]
        try:
            parsed = pd.to_datetime(rest, format="ISO8601", errors="coerce", utc=True)
        except (ValueError, TypeError):
            parsed = pd.to_datetime(rest, format="mixed", errors="coerce", utc=True)
        seconds[todo] = epoch_seconds(parsed.dt.tz_localize(None))
    bad = first_bad(~absent & np.isnan(seconds))
    if bad is not None:
        raise ScenarioError(
            f"{name}: row {rows[bad]}: {field_name} is not a time, got {text.iloc[bad]!r}"
        )
    return seconds


def epoch_seconds(times: pd.Series) -> np.ndarray:
    ns = times.astype("datetime64[ns]").to_numpy().astype("int64").astype(float)
    ns[times.isna().to_numpy()] = np.nan
    return ns / 1e9


def by_unique(values: pd.Series, function) -> np.ndarray:
    """`function` applied to each distinct value once, mapped back to every row (traces repeat
    partitions, QOS, states and TRES strings endlessly; distinct values are few)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    mapped = np.asarray(function(pd.Series(uniques, dtype="str")))
    return mapped[codes]


def normalise_state(values: pd.Series) -> np.ndarray:
    """`CANCELLED by 1234` -> `CANCELLED`; upper case."""
    return by_unique(
        values,
        lambda u: u.str.strip().str.split(" ", n=1).str[0].str.upper().fillna("").to_numpy(object),
    )


def check_order(table: pd.DataFrame, name: str, start_field: str, end_field: str) -> None:
    """An end before its start is a broken row, not a quirk (a start before the submit is kept:
    schedulers record that on requeue)."""
    start, end = table["start"].to_numpy(), table["end"].to_numpy()
    bad = first_bad(end < start - 1e-6)
    if bad is not None:
        raise ScenarioError(
            f"{name}: row {table['row'].iat[bad]}: {end_field} is before {start_field}"
        )


# ---------------------------------------------------------------------------------------------
# Detection and the one entry point the CLI uses until the formats dispatcher lands


def format_module(fmt: str):
    if fmt not in HISTORY_FORMATS:
        raise ScenarioError(f"unknown history format {fmt!r}; choose one of {HISTORY_FORMATS}")
    return importlib.import_module(f"core.formats.{fmt}")


def detect_format(name: str, head: str) -> str | None:
    for fmt in HISTORY_FORMATS:
        if format_module(fmt).sniff(name, head):
            return fmt
    return None


def import_history(
    source: str | bytes | Path,
    format: str = "auto",
    window: ImportWindow | None = None,
    rules: ImportRules | None = None,
    *,
    name: str | None = None,
) -> ImportResult:
    """Detect (or take) the format and import `source` (a path, or the text itself)."""
    shown, _, head = read_source(source, name)
    fmt = format
    if fmt in (None, "auto"):
        fmt = detect_format(shown, head)
        if fmt is None:
            raise ScenarioError(
                f"{shown}: not a recognised history (sacct -P, openb pod list, kubectl get pods "
                "-o json, Helios cluster_log.csv, Acme trace); give --format"
            )
    return format_module(fmt).read_history(source, window, rules, name=name)


# ---------------------------------------------------------------------------------------------
# The mapping


def pow2_ceil(values: np.ndarray) -> np.ndarray:
    """Smallest power of two >= each value (values > 0)."""
    whole = np.maximum(1.0, np.ceil(values - 1e-9))
    return np.exp2(np.ceil(np.log2(whole) - 1e-12)).astype(np.int64)


def binned_occupancy(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, edges: np.ndarray
) -> np.ndarray:
    """sum_i weights_i * |[starts_i, ends_i) & [edges_k, edges_k+1)| for every bin k.

    F(t) = sum_i w_i * (clip(t, s_i, e_i) - s_i) is piecewise linear with slope +w_i from s_i and
    -w_i from e_i, so F at the edges is two cumulative sums over the sorted events.
    """
    keep = ends > starts
    s, e, w = starts[keep], ends[keep], weights[keep]
    if not len(s):
        return np.zeros(len(edges) - 1)
    times = np.concatenate([s, e])
    slopes = np.concatenate([w, -w])
    order = np.argsort(times, kind="stable")
    times, slopes = times[order], slopes[order]
    slope = np.cumsum(slopes)
    slope_time = np.cumsum(slopes * times)
    idx = np.searchsorted(times, edges, side="right")
    a = np.where(idx > 0, slope[np.maximum(idx - 1, 0)], 0.0)
    b = np.where(idx > 0, slope_time[np.maximum(idx - 1, 0)], 0.0)
    return np.diff(a * edges - b)


def peak_in_use(
    starts: np.ndarray, ends: np.ndarray, gpus: np.ndarray, lo: float, hi: float
) -> float:
    """The most GPUs held at any instant in [lo, hi) (an end at t frees before a start at t)."""
    live = (starts < hi) & (ends > lo)
    s, e, g = np.maximum(starts[live], lo), np.minimum(ends[live], hi), gpus[live]
    if not len(s):
        return 0.0
    times = np.concatenate([s, e])
    deltas = np.concatenate([g, -g])
    order = np.lexsort((deltas > 0, times))
    return float(max(0.0, np.cumsum(deltas[order]).max()))


def _classify(table: pd.DataFrame, rules: ImportRules) -> tuple[np.ndarray, np.ndarray]:
    """(type, real-time group) per row from the first matching rule."""
    n = len(table)
    types = np.full(n, rules.default_type, dtype=object)
    groups = np.full(n, "", dtype=object)
    done = np.zeros(n, dtype=bool)
    for rule in rules.type_rules:
        for column in rule.fields:
            codes, uniques = pd.factorize(table[column], use_na_sentinel=False)
            uniques = pd.Series(uniques, dtype="str").fillna("")
            hit_u = uniques.str.contains(rule.pattern, case=False, regex=True).to_numpy(bool)
            hit_u = hit_u & (uniques != "").to_numpy(bool)
            if not hit_u.any():
                continue
            hit = hit_u[codes] & ~done
            if not hit.any():
                continue
            types[hit] = rule.type
            if rule.group:
                groups[hit] = rule.group
            elif column == "name":
                matched = uniques.str.extract(f"({rule.pattern})", flags=re.IGNORECASE)[0]
                groups[hit] = matched.str.lower().to_numpy(dtype=object)[codes[hit]]
            else:
                groups[hit] = uniques.to_numpy(dtype=object)[codes[hit]]
            done |= hit
    return types, groups


def _priorities(table: pd.DataFrame, rules: ImportRules) -> tuple[np.ndarray, str]:
    n = len(table)
    priority = np.full(n, np.nan)
    for rule in rules.priority_rules:
        for column in rule.fields:
            codes, uniques = pd.factorize(table[column], use_na_sentinel=False)
            uniques = pd.Series(uniques, dtype="str").fillna("")
            hit_u = uniques.str.contains(rule.pattern, case=False, regex=True).to_numpy(bool)
            hit_u = hit_u & (uniques != "").to_numpy(bool)
            hit = hit_u[codes] & np.isnan(priority)
            priority[hit] = float(rule.priority)
    matched = int((~np.isnan(priority)).sum())
    own = "the default rules" if rules == ImportRules() else "the rules file"
    source = (
        f"{own} ({matched:,} of the trace's {n:,} jobs matched; the others "
        f"{rules.default_priority:g})"
    )
    raw = table["priority_raw"]
    if rules.rank_priority and raw.notna().any():
        ranked = np.clip(np.ceil(raw.rank(method="average", pct=True).to_numpy() * 10), 1, 10)
        fill = np.isnan(priority) & ~np.isnan(ranked)
        priority[fill] = ranked[fill]
        source = (
            f"{own} ({matched:,} of the trace's {n:,} jobs matched), then the scheduler's "
            "priority ranked into 1-10"
        )
    priority[np.isnan(priority)] = rules.default_priority
    return priority, source


def _window_start(window: ImportWindow, info: TraceInfo, submit: np.ndarray) -> float:
    if window.start is None:
        known = submit[np.isfinite(submit)]
        if not len(submit):
            raise ScenarioError(f"{info.name}: no job with GPUs in the file; nothing to import")
        if not len(known):
            raise ScenarioError(f"{info.name}: no GPU job has a submit time; give --start")
        median = float(np.median(known))
        return math.floor(median / DAY) * DAY
    if info.relative:
        try:
            hours = float(window.start)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ScenarioError(
                f"{info.name}: times are relative to the trace start, so --start is in hours "
                f"from it, got {window.start!r}"
            ) from None
        if not math.isfinite(hours):
            raise ScenarioError(f"{info.name}: --start must be a finite number of hours")
        return hours * HOUR
    if isinstance(window.start, int | float):
        raise ScenarioError(
            f"{info.name}: times are calendar times, so --start is an ISO time such as "
            f"2026-08-17T00:00:00, got {window.start!r}"
        )
    try:
        stamp = pd.Timestamp(window.start)
    except (TypeError, ValueError):
        raise ScenarioError(f"--start must be an ISO time, got {window.start!r}") from None
    if stamp is pd.NaT:
        raise ScenarioError(f"--start must be an ISO time, got {window.start!r}")
    if stamp.tzinfo is not None:  # to the trace's own wall clock
        return stamp.tz_convert("UTC").tz_localize(None).value / 1e9 + info.utc_offset
    return stamp.value / 1e9


def _time_label(seconds: float, relative: bool) -> str:
    if relative:
        return f"{seconds / HOUR:g} h"
    return pd.Timestamp(seconds * 1e9).isoformat()


def _unique_ids(ids: pd.Series, taken: set[str] = frozenset()) -> pd.Series:
    """Printable ids of at most 200 characters; repeats get '#2', '#3', ..."""
    clean = ids.astype("str").str.replace(r"[\x00-\x1f]", "_", regex=True).str.slice(0, 190)
    clean = clean.where(clean.str.strip() != "", "job")
    count = clean.groupby(clean).cumcount().to_numpy()
    out = clean.where(count == 0, clean + "#" + (count + 1).astype(str))
    if taken:
        clash = out.isin(taken)
        out = out.where(~clash, out + "#batch")
    return out


def _realtime_series(
    rt_live: np.ndarray,
    groups: np.ndarray,
    start: np.ndarray,
    held_until: np.ndarray,
    gpus: np.ndarray,
    W0: float,
    step: float,
    T: int,
    history_from: float,
) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per real-time group: GPUs held per step of the window (time-weighted) and per hour of
    the history before it, from `history_from` (one vectorised pass per group)."""
    W1 = W0 + T * step
    edges = W0 + step * np.arange(T + 1)
    history_hours = (
        max(0, int(math.floor((W0 - history_from) / HOUR + 1e-9)))
        if math.isfinite(history_from)
        else 0
    )
    hist_edges = W0 - HOUR * np.arange(history_hours, -1, -1)
    group_names = sorted({g for g in groups[rt_live]}) if rt_live.any() else []
    rt_demand: dict[str, np.ndarray] = {}
    rt_history: dict[str, np.ndarray] = {}
    for g in group_names:
        m = rt_live & (groups == g)
        s, e, w = start[m] - W0, np.minimum(held_until[m], W1) - W0, gpus[m]
        rt_demand[g] = binned_occupancy(s, e, w, edges - W0) / step
        rt_history[g] = (
            binned_occupancy(s, e, w, hist_edges - W0) / HOUR if history_hours else np.zeros(0)
        )
    return group_names, rt_demand, rt_history


def history_reader(read_table: Callable[..., tuple[pd.DataFrame, TraceInfo]]) -> Callable[..., Any]:
    """A format module's `read_history`: its `read_table`, then `import_table` for the window.

    Extra keyword options (openb's `nodes`) go to `read_table`.
    """

    def read_history(
        source: str | bytes | Path,
        window: ImportWindow | None = None,
        rules: ImportRules | None = None,
        *,
        name: str | None = None,
        **options: Any,
    ) -> ImportResult:
        table, info = read_table(source, name, **options)
        return import_table(table, info, window, rules)

    return read_history


def _check_window_in_trace(
    info: TraceInfo, W0: float, W1: float, stamps: np.ndarray, trace_end: float
) -> None:
    """A window the trace says nothing about is an empty cluster, not a plan of it: refuse one
    that ends before the first job came, or starts after the export (where the format knows its
    time; otherwise jobs never started may still wait in a later window)."""
    stamps = stamps[np.isfinite(stamps)]
    if not len(stamps):
        return
    first = float(stamps.min())
    if (math.isfinite(info.end) and info.end <= W0) or first >= W1:
        raise ScenarioError(
            f"{info.name}: the window {_time_label(W0, info.relative)} .. "
            f"{_time_label(W1, info.relative)} is outside the trace, which runs from "
            f"{_time_label(first, info.relative)} to {_time_label(trace_end, info.relative)}: "
            "give a --start inside it"
        )


def import_table(
    table: pd.DataFrame,
    info: TraceInfo,
    window: ImportWindow | None = None,
    rules: ImportRules | None = None,
) -> ImportResult:
    """The scenario of `window` from a job table, with the as-run metrics and the summary."""
    window = window or ImportWindow()
    rules = rules or ImportRules()
    dropped = dict(info.dropped)
    step = window.step_seconds
    T = window.steps

    gpus = table["gpus"].to_numpy(dtype=float)
    no_gpu = ~(gpus > 0)
    all_submit = table["submit"].to_numpy(dtype=float)
    W0 = _window_start(window, info, all_submit[~no_gpu])
    W1 = W0 + T * step
    # jobs without GPUs are counted where they touch the window, like every other drop
    ends = table["end"].to_numpy(dtype=float)
    touching = no_gpu & (all_submit < W1) & ~(ends <= W0)
    if touching.any():
        dropped["no GPUs"] = dropped.get("no GPUs", 0) + int(touching.sum())
    jobs = table.loc[~no_gpu].reset_index(drop=True)
    gpus = gpus[~no_gpu]
    submit = jobs["submit"].to_numpy(dtype=float)
    start = jobs["start"].to_numpy(dtype=float)
    end = jobs["end"].to_numpy(dtype=float)
    limit = jobs["time_limit"].to_numpy(dtype=float)
    trace_end = info.end
    if not math.isfinite(trace_end):
        stamps = np.concatenate([submit, start, end])
        stamps = stamps[np.isfinite(stamps)]
        trace_end = float(stamps.max()) if len(stamps) else 0.0
    _check_window_in_trace(info, W0, W1, np.concatenate([submit, start]), trace_end)
    submit = np.where(np.isfinite(submit), submit, np.where(np.isfinite(start), start, np.nan))

    types, groups = _classify(jobs, rules)
    priority, priority_source = _priorities(jobs, rules)
    is_rt = types == REALTIME_TYPE

    started = np.isfinite(start)
    finished = started & np.isfinite(end)
    never_ran = ~started & np.isfinite(end)  # cancelled (or deleted) while waiting
    zero_run = finished & (end - start <= 0)

    # Run time: real where finished; the time limit where not (at least what is already run);
    # without a limit, the median real run time of finished jobs of the same type.
    run = np.where(finished, end - start, np.nan)
    estimate = limit.copy()
    no_limit = ~np.isfinite(estimate)
    if no_limit.any():
        medians = pd.Series(run).groupby(types).median()
        estimate[no_limit] = pd.Series(types[no_limit]).map(medians).to_numpy(dtype=float)
    estimate = np.where(np.isfinite(estimate) & (estimate > 0), estimate, step)
    running_at_export = started & ~finished
    run = np.where(running_at_export, np.maximum(estimate, trace_end - start), run)
    run = np.where(~started, estimate, run)
    planned_end = start + run
    estimated = ~finished & ~never_ran
    # Real-time services still up at the export are taken to keep running.
    held_until = np.where(finished, end, np.where(is_rt & running_at_export, np.inf, planned_end))
    held_until = np.where(running_at_export & ~is_rt, np.maximum(trace_end, held_until), held_until)

    # ---- batch selection
    batch = ~is_rt & ~never_ran & ~zero_run
    running = batch & started & (start < W0) & (held_until > W0)
    queued = batch & (submit < W0) & ~running & (~started | (start >= W0))
    arriving = batch & (submit >= W0) & (submit < W1)
    in_window = running | queued | arriving
    dropped_never = int((~is_rt & never_ran & (submit < W1) & (end > W0)).sum())
    dropped_zero = int((~is_rt & zero_run & (submit < W1) & (end >= W0)).sum())
    if dropped_never:
        dropped["cancelled before it started"] = dropped_never
    if dropped_zero:
        dropped["ran for 0 seconds"] = dropped_zero

    block = pow2_ceil(gpus) if len(gpus) else np.zeros(0, dtype=np.int64)

    # ---- real-time demand per group and the cluster size
    rt_live = is_rt & started
    history_from = max(W0 - rules.history_days * DAY, _first_time(submit, start))
    group_names, rt_demand, rt_history = _realtime_series(
        rt_live, groups, start, held_until, gpus, W0, step, T, history_from
    )
    history_hours = len(next(iter(rt_history.values()), ()))
    edges = W0 + step * np.arange(T + 1)
    rt_total = sum(rt_demand.values()) if rt_demand else np.zeros(T)

    occupancy_start = np.where(started, start, np.nan)
    use = (in_window | rt_live) & started
    in_use_gpus = np.where(is_rt, gpus, block).astype(float)
    peak = peak_in_use(occupancy_start[use], held_until[use], in_use_gpus[use], W0, W1)
    if window.gpus is not None:
        G, gpus_source = window.gpus, "--gpus"
    else:
        G = int(pow2_ceil(np.array([max(1.0, peak)]))[0])
        gpus_source = "peak GPUs in use in the window, rounded up to a power of two"
        if G > MAX_GPUS:
            raise ScenarioError(
                f"{info.name}: {peak:,.0f} GPUs in use at the peak; give --gpus (at most "
                f"{MAX_GPUS:,})"
            )

    too_big = in_window & (block > G)
    if too_big.any():
        dropped[f"needs more than the cluster's {G} GPUs"] = int(too_big.sum())
    in_window &= ~too_big
    running &= ~too_big
    queued &= ~too_big
    arriving &= ~too_big

    # ---- pin running jobs largest first: descending powers of two packed from GPU 0 stay
    # aligned, and all fit whenever their total does
    run_idx = np.flatnonzero(running)
    order = run_idx[np.lexsort((start[run_idx], -block[run_idx]))]
    offsets = np.cumsum(block[order]) - block[order]
    fits = offsets + block[order] <= G
    pinned, unpinned = order[fits], order[~fits]
    gpu_start = np.full(len(jobs), -1, dtype=np.int64)
    gpu_start[pinned] = offsets[fits]
    remaining = np.ceil((planned_end - W0) / step - 1e-9)
    remaining = np.where(np.isfinite(remaining), np.maximum(1, remaining), 1).astype(np.int64)

    arrival = np.where(arriving, np.floor((submit - W0) / step), 0).astype(np.int64)
    arrival = np.clip(arrival, 0, T - 1)
    not_pinned = np.zeros(len(jobs), dtype=bool)
    not_pinned[unpinned] = True
    work_seconds = np.where(not_pinned, planned_end - W0, run)
    gpu_hours = block * np.maximum(work_seconds, 1.0) / HOUR

    # ---- build the scenario
    has_team = "team" in {f.name for f in fields(BatchJob)}
    sel = np.flatnonzero(in_window)
    sel = sel[np.argsort(np.where(running[sel], -1, arrival[sel]), kind="stable")]
    ids = _unique_ids(jobs["job_id"].iloc[sel]).to_numpy(dtype=object)
    team_values = jobs["team"].to_numpy(dtype=object)
    batch_jobs = []
    for k, i in enumerate(sel):  # the window's jobs only: thousands, not the whole trace
        pin = (
            Running(int(gpu_start[i]), int(block[i]), int(remaining[i]))
            if gpu_start[i] >= 0
            else None
        )
        extra = {"team": team_values[i]} if has_team and team_values[i] else {}
        batch_jobs.append(
            BatchJob(
                id=ids[k],
                type=types[i],
                priority=float(priority[i]),
                gpus_min=int(block[i]),
                gpus_max=int(block[i]),
                gpu_hours=round(float(gpu_hours[i]), 6),
                arrival_step=int(arrival[i]),
                running=pin,
                **extra,
            )
        )
    taken = set(ids)
    swap_cap = rules.swap_cap if rules.swap_cap is not None else G
    rt_jobs, rt_summary = [], []
    for g in group_names:
        m = rt_live & (groups == g)
        job_id = _rt_id(g, taken)
        taken.add(job_id)
        demand = np.round(rt_demand[g], 4)
        rt_jobs.append(
            RealtimeJob(
                id=job_id,
                priority=float(priority[m].max()),
                gpus_min=0,
                gpus_max=G,
                swap_cap=swap_cap,
                demand=tuple(float(d) for d in demand),
                history=tuple(float(h) for h in np.round(rt_history[g], 4))
                if history_hours
                else None,
            )
        )
        in_win = m & (start < W1) & (held_until > W0)
        rt_summary.append(
            {
                "id": job_id,
                "group": g,
                "jobs_in_window": int(in_win.sum()),
                "mean_gpus": round(float(demand.mean()), 3),
                "peak_gpus": round(float(demand.max()), 3),
                "gpu_hours": round(float(demand.sum() * step / HOUR), 3),
                "history_hours": history_hours,
            }
        )

    start_dt = None if info.relative else pd.Timestamp(W0 * 1e9).to_pydatetime()
    label = _time_label(W0, info.relative)
    scenario = Scenario(
        name=f"{Path(info.name).stem} {label}"[:120],
        description=(
            f"{info.format} history {info.name}: {window.days:g} day(s) from {label}, "
            f"{window.step_minutes}-minute steps"
        ),
        cluster=Cluster(gpus=G, step_minutes=window.step_minutes, horizon_steps=T, start=start_dt),
        jobs=(*batch_jobs, *rt_jobs),
    )

    # ---- as-run: what the trace says ran in the window
    rounded = in_window & (block != gpus)
    as_run = _as_run(
        scenario,
        sel,
        start,
        end,
        held_until,
        submit,
        block,
        gpus,
        priority,
        running,
        rt_total,
        W0,
        W1,
        edges,
    )

    by_type = {t: 0 for t in BATCH_TYPES}
    for t, n in zip(*np.unique(types[sel], return_counts=True), strict=True):
        by_type[str(t)] = int(n)
    notes = list(info.notes)
    if len(unpinned):
        notes.append(
            f"{len(unpinned)} job(s) running at the window start did not fit beside the others "
            f"on {G} GPUs; they wait at step 0 with their remaining work"
        )
    if trace_end < W1 and (running_at_export & (start < W1)).any():
        notes.append(
            f"the window ends after the trace ({_time_label(trace_end, info.relative)}): jobs "
            "still running then are taken to run to their time limit (services: on)"
        )
    if as_run["over_capacity_steps"]:
        notes.append(
            f"as-run holds more than {G} GPUs at {as_run['over_capacity_steps']} step(s): the "
            "cluster given is smaller than what really ran"
        )
    summary = {
        "file": info.name,
        "format": info.format,
        "window": {
            "start": label,
            "end": _time_label(W1, info.relative),
            "days": window.days,
            "step_minutes": window.step_minutes,
            "steps": T,
            "gpus": G,
            "gpus_source": gpus_source,
            "peak_gpus_in_use": round(peak, 3),
        },
        "trace": {
            "rows": info.rows,
            "gpu_jobs": int(len(jobs)),
            "end": _time_label(trace_end, info.relative),
            "cluster_gpus": info.cluster_gpus,
        },
        "batch": {
            "jobs": int(len(sel)),
            "by_type": by_type,
            "arriving": int(arriving.sum()),
            "queued_at_start": int(queued.sum()),
            "running_at_start": int(running.sum()),
            "pinned": int(len(pinned)),
            "not_pinned": int(len(unpinned)),
            "rounded_up": int(rounded.sum()),
            "work_estimated": int((in_window & estimated).sum()),
        },
        "realtime": rt_summary,
        "realtime_jobs": int((rt_live & (start < W1) & (held_until > W0)).sum()),
        "dropped": dropped,
        "priority_from": priority_source,
        "notes": notes,
    }
    return ImportResult(scenario, as_run, summary)


def _first_time(submit: np.ndarray, start: np.ndarray) -> float:
    stamps = np.concatenate([submit, start])
    stamps = stamps[np.isfinite(stamps)]
    return math.floor(float(stamps.min()) / HOUR) * HOUR if len(stamps) else math.inf


def _rt_id(group: str, taken: set[str]) -> str:
    base = "rt-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", str(group)).strip("-")[:60] or "service")
    job_id, n = base, 2
    while job_id in taken:
        job_id, n = f"{base}-{n}", n + 1
    return job_id


def _as_run(
    scenario: Scenario,
    sel: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    held_until: np.ndarray,
    submit: np.ndarray,
    block: np.ndarray,
    gpus: np.ndarray,
    priority: np.ndarray,
    running: np.ndarray,
    rt_total: np.ndarray,
    W0: float,
    W1: float,
    edges: np.ndarray,
) -> dict[str, Any]:
    """The metrics of core.plan.metrics for what really ran, on the scenario's job sizes."""
    c, policy = scenario.cluster, scenario.policy
    G, T, step_h = c.gpus, c.horizon_steps, c.step_hours
    step = c.step_minutes * 60.0
    s = np.where(np.isfinite(start[sel]), start[sel], np.inf) - W0
    e = np.minimum(held_until[sel], W1 + step) - W0
    rel_edges = edges - W0
    g = block[sel].astype(float)
    p = priority[sel]
    batch_steps = binned_occupancy(s, e, g, rel_edges) / step  # GPUs held per step
    weighted_steps = binned_occupancy(s, e, g * p, rel_edges) / step
    real_steps = binned_occupancy(s, e, gpus[sel], rel_edges) / step
    overlap_h = np.nan_to_num(
        np.clip(np.minimum(e, W1 - W0) - np.maximum(s, 0), 0, None) / HOUR, nan=0.0
    )
    discount = policy.decay ** np.arange(T, dtype=float)
    cells = G * T
    batch_cells = float(batch_steps.sum())
    rt_cells = float(rt_total.sum())
    started = overlap_h > 0
    completed = started & np.isfinite(end[sel]) & (end[sel] <= W1)
    waited = started & ~running[sel] & np.isfinite(start[sel])
    waits = (start[sel][waited] - submit[sel][waited]).clip(min=0) / HOUR
    total_steps = batch_steps + rt_total
    return {
        "planner": "as-run",
        "utilization": (batch_cells + rt_cells) / cells,
        "utilization_real_gpus": (float(real_steps.sum()) + rt_cells) / cells,
        "allocated_fraction": (batch_cells + rt_cells) / cells,
        "value": float(p @ (g * overlap_h)),
        "objective": policy.reward_weight * float(weighted_steps @ discount),
        "completed_jobs": int(completed.sum()),
        "started_jobs": int(started.sum()),
        "batch_jobs": int(len(sel)),
        "unstarted_jobs": int((~started).sum()),
        "rt_shortfall_gpu_hours": 0.0,
        "rt_coverage": 1.0,
        "wait_hours_p50": float(np.percentile(waits, 50)) if len(waits) else None,
        "wait_hours_p90": float(np.percentile(waits, 90)) if len(waits) else None,
        "idle_gpu_hours": float(np.clip(G - total_steps, 0, None).sum() * step_h),
        "over_capacity_steps": int((total_steps > G + 1e-6).sum()),
        "per_step": {
            "batch_gpus": [round(float(x), 4) for x in batch_steps],
            "realtime_gpus": [round(float(x), 4) for x in rt_total],
        },
        "note": AS_RUN_NOTE,
    }


# ---------------------------------------------------------------------------------------------
# What the pages show: the demand chart's data and the one-screen summary


def demand_frame(result: ImportResult) -> pd.DataFrame:
    """One row per step: each real-time group's demand and the GPUs really held (as-run),
    with the step's start time where the trace has calendar times."""
    scenario = result.scenario
    c = scenario.cluster
    frame = pd.DataFrame({"step": np.arange(c.horizon_steps)})
    if c.start is not None:
        frame["time"] = pd.Timestamp(c.start) + pd.to_timedelta(
            frame["step"] * c.step_minutes, unit="min"
        )
    for job in scenario.realtime_jobs:
        frame[job.id] = job.demand
    per_step = result.as_run["per_step"]
    frame["as_run_batch_gpus"] = per_step["batch_gpus"]
    frame["as_run_realtime_gpus"] = per_step["realtime_gpus"]
    return frame


def format_summary(summary: dict[str, Any], as_run: dict[str, Any]) -> str:
    w, b, t = summary["window"], summary["batch"], summary["trace"]
    lines = [
        f"{summary['file']} ({summary['format']}): {t['gpu_jobs']:,} GPU jobs in "
        f"{t['rows']:,} rows, trace ends {t['end']}"
        + (f", cluster {t['cluster_gpus']:,} GPUs" if t.get("cluster_gpus") else ""),
        f"window {w['start']} .. {w['end']}: {w['steps']} steps of {w['step_minutes']} min on "
        f"{w['gpus']} GPUs ({w['gpus_source']}; peak in use {w['peak_gpus_in_use']:g})",
        "batch jobs: "
        + ", ".join(f"{n} {k}" for k, n in b["by_type"].items())
        + f" = {b['jobs']} ({b['arriving']} arriving, {b['queued_at_start']} queued at the "
        f"start, {b['running_at_start']} running: {b['pinned']} pinned, {b['not_pinned']} not)",
        f"rounded up to a power of two: {b['rounded_up']}; work estimated (never finished): "
        f"{b['work_estimated']}",
        "dropped: " + (", ".join(f"{n} {why}" for why, n in summary["dropped"].items()) or "none"),
        f"real-time: {summary['realtime_jobs']} job(s) in {len(summary['realtime'])} group(s)",
    ]
    for g in summary["realtime"]:
        lines.append(
            f"  {g['id']}: {g['jobs_in_window']} jobs, mean {g['mean_gpus']:g} GPUs, peak "
            f"{g['peak_gpus']:g}, {g['gpu_hours']:g} GPU-h; history {g['history_hours']} h"
        )
    over = (  # (a share of a cluster smaller than what ran: said, not left to puzzle over)
        f", more GPUs than the cluster's {summary['window']['gpus']}: see the note"
        if as_run["over_capacity_steps"]
        else ""
    )
    lines.append(
        f"as-run: utilization {as_run['utilization']:.1%} (real GPU counts "
        f"{as_run['utilization_real_gpus']:.1%}{over}), value {as_run['value']:,.1f}, completed "
        f"{as_run['completed_jobs']}/{as_run['batch_jobs']}, started {as_run['started_jobs']}"
    )
    lines.append(f"  ({as_run['note']})")
    lines.append(f"priority from {summary['priority_from']}")
    lines.extend(f"note: {n}" for n in summary["notes"])
    return "\n".join(lines)
