"""The Capacity page on a cluster of node groups (SPEC section 8): which mix of nodes to buy.
The inputs (node counts per group) and the results; what they show is core.mix_views'."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from core import charts, mix_views, views
from core.model import Scenario
from core.sweep import ceiling, sweep_to_csv
from pages import common

HINTS = {  # what lifts a ceiling, by target
    "coverage": "raise those services' gpus_max (or swap_cap)",
    "completed": "lengthen the horizon or raise those jobs' gpus_max",
}


def count_inputs(s: Scenario, prefix: str) -> dict[str, str]:
    """One text input per node group (the counts to try, 0 to twice today's by default)."""
    keys = {n.group: f"{prefix}cap_nodes_{n.group}" for n in s.cluster.nodes}
    for n in s.cluster.nodes:
        common.init_widget(keys[n.group], mix_views.counts_text(mix_views.default_counts(n.count)))
    texts = {}
    columns = st.columns(len(s.cluster.nodes))
    for column, n in zip(columns, s.cluster.nodes, strict=True):
        with column:
            texts[n.group] = st.text_input(
                f"{n.group}: nodes to try",
                key=keys[n.group],
                on_change=common.remember,
                args=(keys[n.group],),
                help=f"Counts of {n.gpus_per_node} x {n.gpu_type} nodes (now {n.count}); every "
                "combination with the other groups' counts is one mix.",
            )
    return texts


def _planner_answers(entries: list[dict[str, Any]], names: list[str]) -> pd.DataFrame:
    out = []
    for e in entries:
        record = {"planner": common.planner_label(e["planner"])}
        if e["nodes"] is None:
            record["cheapest mix"] = "none meets the targets"
            record.update({f"nodes_{g}": None for g in names})
            record.update(gpus=None, cost_per_hour=None)
            record["why"] = " ".join(views.sentence(w) for w in e["missed"].values())
        else:
            record["cheapest mix"] = e["mix"]
            record.update({f"nodes_{g}": e["nodes"][g] for g in names})
            record.update(gpus=e["gpus"], cost_per_hour=e["cost_per_hour"], why="")
        out.append(record)
    return pd.DataFrame(out)


def show(s: Scenario, result: dict[str, Any], coverage: float, completed: float) -> None:
    rows = result["rows"]
    names = mix_views.groups(s)
    table = mix_views.mix_table(s, rows, coverage, completed)
    planners = list(dict.fromkeys(r["planner"] for r in rows))
    entries = mix_views.cheapest_mixes(s, table, coverage, completed, planners)
    best = mix_views.answer(entries)
    ranked_by = "cost_per_hour" if mix_views.priced(s) else "gpus"
    invalid = table[table["error"] != ""]
    n_mixes = len(rows) // max(1, len(planners))
    st.caption(
        f"{n_mixes} mix{'' if n_mixes == 1 else 'es'} x "
        f"{views.plural(len(planners), 'planner')} = {len(rows)} runs on {result['engine']}"
        + (
            f"; {len(invalid) // max(1, len(planners))} of the mixes cannot hold the workload"
            if len(invalid)
            else ""
        )
        + "."
    )

    st.subheader("Cheapest mix meeting the targets")
    st.caption(
        f"Real-time coverage >= {coverage * 100:g}% and completed batch jobs >= "
        f"{completed * 100:g}% of all; "
        + (
            "ranked by cost per hour (each GPU type's price), ties to fewer GPUs."
            if ranked_by == "cost_per_hour"
            else "ranked by GPUs, ties to the order tried."
        )
    )
    if ranked_by == "gpus":
        st.info(
            "Some GPU type has no price (cost_per_gpu_hour in the node table on Workload, or the "
            "policy's gpu_hour_cost): mixes are ranked by GPUs, not by cost per hour."
        )
    if best is not None:
        same = [  # every planner whose answer is this mix
            common.planner_label(e["planner"]) for e in entries if e["nodes"] == best["nodes"]
        ]
        st.success(f"**Buy {mix_views.answer_words(s, best)}** (planned by {' and '.join(same)}).")
    else:
        st.error("**No mix tried meets the targets.**")
        for why, who in mix_views.reasons(entries).items():  # one warning per reason
            planners_words = " and ".join(common.planner_label(p) for p in who)
            st.warning(f"**{planners_words}:** {views.sentence(why)}")
    misses = ceiling(s).misses(coverage, completed)
    if misses:
        st.warning(
            " ".join(views.sentence(reason) for reason in misses.values())
            + f" More nodes do not help: {' and '.join(HINTS[name] for name in misses)} in the "
            "Workload editor, or lower the target."
        )
    answers = _planner_answers(entries, names)
    money = st.column_config.NumberColumn("cost per hour", format="%,.2f")
    st.dataframe(
        answers,
        hide_index=True,
        key="cap_mix_answers",
        placeholder="—",
        column_config={"cost_per_hour": money},
    )

    points = mix_views.chart_points(table, ranked_by)
    labels = {p: common.planner_label(p) for p in planners}
    if len(points):
        st.plotly_chart(
            charts.mix_figure(points, ranked_by, coverage, best, labels),
            key="cap_mix_chart",
            config={"displayModeBar": False},
        )

    st.subheader("Every mix tried")
    if len(invalid):
        st.caption(
            f"{views.plural(len(invalid), 'run')} at mixes that cannot hold the workload, e.g. "
            f"{invalid.iloc[0]['mix']}: {invalid.iloc[0]['error']}"
        )
    share = st.column_config.NumberColumn(format="percent", step=0.001)
    shown = table.assign(planner=[common.planner_label(p) for p in table["planner"]])
    shown = mix_views.cheapest_first(shown)
    st.container(key="cap_mix_rows").dataframe(
        shown,
        hide_index=True,
        key="cap_mix_table",
        placeholder="—",
        column_config={
            "cost_per_hour": money,
            "rt_coverage": st.column_config.NumberColumn(
                "rt coverage", format="percent", step=0.001
            ),
            "completed_share": st.column_config.NumberColumn(
                "completed", format="percent", step=0.001
            ),
            **{c: share for c in table.columns if c.startswith("utilization")},
            "meets": st.column_config.CheckboxColumn("meets targets"),
            "cheapest": st.column_config.CheckboxColumn("cheapest (planner)"),
        },
    )
    st.download_button(
        "Download sweep.csv",
        sweep_to_csv(mix_views.rows_for_csv(table, rows)),
        file_name="sweep.csv",
        mime="text/csv",
        key="cap_download",
    )
