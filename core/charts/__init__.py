"""Pure plotly figure builders for the app: data in, `go.Figure` out, never streamlit.

The GPU x time grid is drawn as ONE heatmap with a categorical colour mapping (a stepped
colourscale over category codes), not one trace per cell, so 64 GPUs x 48 steps stays fast. Each job
keeps its colour across planners (colour by position in `scenario.jobs`); real-time GPUs held above
the step's demand get a pale shade of the job's colour, which is exactly where `allocated_fraction`
and `utilization` part ways.

One module per figure family: `style` (colours, time axes, the planners' order), `grid` (the
GPU x time grid), `comparison` (planners side by side), `demand` (forecasts and demand),
`analysis` (coverage risk, idle windows), `capacity` (the capacity what-ifs) and
`nodes` (section 8: the grid banded by node group, utilization and cost per GPU type). Every name is
importable from `core.charts` itself.
"""

from ..planners import PLANNER_COLOURS
from .analysis import (
    coverage_risk_figure,
    idle_windows_figure,
)
from .capacity import (
    _CAPACITY_DASHES,
    CAPACITY_METRICS,
    capacity_figure,
    mix_figure,
)
from .comparison import (
    IDLE_PARTS,
    benchmark_figure,
    idle_breakdown_figure,
    realtime_figure,
    stability_figure,
    utilization_value_figure,
    wait_figure,
)
from .demand import (
    demand_figure,
    forecast_figure,
    gpu_path_figure,
    history_demand_figure,
)
from .grid import (
    _finish_grid,
    _grid_hover,
    grid_figure,
    grid_legend,
    serving_mask,
)
from .nodes import band_by_node, gpu_type_figure
from .style import (
    AS_RUN,
    AS_RUN_COLOURS,
    COLOUR_BY,
    IDLE_COLOUR,
    JOB_COLOURS,
    JOB_COLOURS_UP_TO,
    MAX_DRAWN_CELLS,
    MAX_HOVER_CELLS,
    METRIC_COLOURS,
    NO_TEAM,
    PLANNER_ORDER,
    REALTIME_COLOURS,
    STATIC,
    TYPE_COLOURS,
    _bar_colours,
    _group,
    _label_ticks,
    _planner_rows,
    _time_axis,
    default_colour_by,
    job_colours,
    pale,
    step_labels,
)

__all__ = [
    "AS_RUN",
    "AS_RUN_COLOURS",
    "CAPACITY_METRICS",
    "COLOUR_BY",
    "IDLE_COLOUR",
    "IDLE_PARTS",
    "JOB_COLOURS",
    "JOB_COLOURS_UP_TO",
    "MAX_DRAWN_CELLS",
    "MAX_HOVER_CELLS",
    "METRIC_COLOURS",
    "NO_TEAM",
    "PLANNER_COLOURS",
    "PLANNER_ORDER",
    "REALTIME_COLOURS",
    "STATIC",
    "TYPE_COLOURS",
    "benchmark_figure",
    "capacity_figure",
    "coverage_risk_figure",
    "default_colour_by",
    "demand_figure",
    "band_by_node",
    "forecast_figure",
    "gpu_path_figure",
    "gpu_type_figure",
    "grid_figure",
    "grid_legend",
    "history_demand_figure",
    "idle_breakdown_figure",
    "idle_windows_figure",
    "job_colours",
    "mix_figure",
    "pale",
    "realtime_figure",
    "serving_mask",
    "stability_figure",
    "step_labels",
    "utilization_value_figure",
    "wait_figure",
    # private helpers, kept importable from here
    "_CAPACITY_DASHES",
    "_bar_colours",
    "_finish_grid",
    "_grid_hover",
    "_group",
    "_label_ticks",
    "_planner_rows",
    "_time_axis",
]
