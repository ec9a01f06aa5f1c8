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

The package, by step: `table` (the job table and the results), `options` (window and rules),
`reading` (helpers the format modules share), `dispatch` (detection, `import_history`,
`history_reader`), `timeline` (the window on the time axis, occupancy), `classify` (types,
priorities, ids), `mapping` (`import_table`), `rows` (every row used or skipped, and why),
`as_run` (what really ran, on the plans' grid) and `display` (what the pages show). Every
name is importable from `core.formats.history` itself.
"""

from .as_run import AS_RUN_NOTE, _as_run
from .classify import _classify, _priorities, _rt_id, _unique_ids
from .dispatch import detect_format, format_module, history_reader, import_history
from .display import demand_frame, format_summary, rounding_line, rows_line
from .mapping import import_table
from .options import (
    _WORDS,
    DEFAULT_PRIORITY_RULES,
    DEFAULT_TYPE_RULES,
    ImportRules,
    ImportWindow,
    PriorityRule,
    TypeRule,
    _check_rule,
    _field_list,
    _rule_list,
)
from .reading import (
    _FAST_TIME_FORMATS,
    _to_floats,
    _where_broken,
    as_text,
    by_unique,
    check_order,
    epoch_seconds,
    first_bad,
    header_of,
    is_path,
    normalise_state,
    parse_numbers,
    parse_times,
    read_delimited,
    read_source,
    require_columns,
)
from .table import (
    DAY,
    HISTORY_FORMATS,
    HOUR,
    MAX_HISTORY_BYTES,
    RULE_FIELDS,
    SNIFF_BYTES,
    TABLE_COLUMNS,
    TEXT_COLUMNS,
    ImportResult,
    TraceInfo,
    empty_table,
)
from .timeline import (
    _check_window_in_trace,
    _first_time,
    _realtime_series,
    _time_label,
    _window_start,
    binned_occupancy,
    peak_in_use,
    pow2_ceil,
)

__all__ = [
    "AS_RUN_NOTE",
    "DAY",
    "DEFAULT_PRIORITY_RULES",
    "DEFAULT_TYPE_RULES",
    "HISTORY_FORMATS",
    "HOUR",
    "MAX_HISTORY_BYTES",
    "RULE_FIELDS",
    "SNIFF_BYTES",
    "TABLE_COLUMNS",
    "TEXT_COLUMNS",
    "ImportResult",
    "ImportRules",
    "ImportWindow",
    "PriorityRule",
    "TraceInfo",
    "TypeRule",
    "as_text",
    "binned_occupancy",
    "by_unique",
    "check_order",
    "demand_frame",
    "detect_format",
    "empty_table",
    "epoch_seconds",
    "first_bad",
    "format_module",
    "format_summary",
    "header_of",
    "history_reader",
    "import_history",
    "import_table",
    "is_path",
    "normalise_state",
    "parse_numbers",
    "parse_times",
    "peak_in_use",
    "pow2_ceil",
    "read_delimited",
    "read_source",
    "require_columns",
    "rounding_line",
    "rows_line",
    # private helpers, kept importable from here (core.history_view uses two of them)
    "_FAST_TIME_FORMATS",
    "_WORDS",
    "_as_run",
    "_check_rule",
    "_check_window_in_trace",
    "_classify",
    "_field_list",
    "_first_time",
    "_priorities",
    "_realtime_series",
    "_rt_id",
    "_rule_list",
    "_time_label",
    "_to_floats",
    "_unique_ids",
    "_where_broken",
    "_window_start",
]
