"""What the Capacity page shows when the cluster has node groups (SPEC section 8): the node
counts to try, the mixes as sweep points, the cheapest mix meeting the targets per planner,
what is missed where none does, and the rows as a table and as chart data. Pure (no
streamlit): rows in (core.sweep.run_sweep's, with `nodes_<group>` columns), values out.

The cheapest mix is ranked as core.mix.size_mix ranks: by cost per hour, by GPUs where some GPU
has no price, ties to fewer GPUs, then to the order the mixes were given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from .mix import Mix, cost_per_hour, mix_gpus, parse_vary
from .model import Scenario, ScenarioError
from .sweep import ERROR_COLUMN, SweepPoint, completed_fraction, meets_targets, sweep_points

MAX_DEFAULT_COUNTS = 7  # node counts tried per group by default


def default_counts(count: int) -> list[int]:
    """Node counts to try for a group of `count` nodes: 0 to twice as many, every count where
    that is a few, else a spread of fractions of it (0, 1/2, 3/4, 1, 5/4, 3/2, 2)."""
    if 2 * count + 1 <= MAX_DEFAULT_COUNTS:
        return list(range(0, max(2, 2 * count) + 1))
    return sorted({round(count * f) for f in (0, 0.5, 0.75, 1, 1.25, 1.5, 2)})


def counts_text(counts: Sequence[int]) -> str:
    return ",".join(str(c) for c in counts)


def parse_counts(scenario: Scenario, texts: Mapping[str, str]) -> dict[str, list[int]]:
    """{group: "0,1,2"} from the page's inputs as {group: counts} (core.mix.parse_vary's checks;
    a message names the group)."""
    return parse_vary([f"{group}={text}" for group, text in texts.items()], scenario, "Nodes")


def mix_points(scenario: Scenario, vary: Mapping[str, Sequence[int]]) -> list[SweepPoint]:
    """One sweep point per mix of the counts (the workload's own scales and policy), leaving out
    the mix of no GPUs at all; none left raises ScenarioError."""
    points = [p for p in sweep_points(scenario, nodes=vary) if p.gpus >= 1]
    if not points:
        raise ScenarioError("Nodes: every mix of these counts holds no GPUs")
    return points


def groups(scenario: Scenario) -> list[str]:
    return [n.group for n in scenario.cluster.nodes]


def row_mix(row: Mapping[str, Any], names: Sequence[str]) -> Mix:
    return tuple((g, int(row[f"nodes_{g}"])) for g in names)


def mix_words(scenario: Scenario, mix: Mix) -> str:
    """'1 x h100x8 + 1 x a10x4' (groups at 0 nodes left out)."""
    parts = [f"{count} x {group}" for group, count in mix if count]
    return " + ".join(parts) if parts else "no nodes"


def priced(scenario: Scenario) -> bool:
    """Whether every GPU type has a price (its own or the policy's): mixes are then ranked by
    cost per hour, else by GPUs."""
    c = scenario.cluster
    everything = tuple((n.group, max(1, n.count)) for n in c.nodes)
    return cost_per_hour(scenario, everything) is not None


def _rank(scenario: Scenario, mix: Mix, order: int, by_cost: bool) -> tuple:
    cost = cost_per_hour(scenario, mix) if by_cost else None
    return (cost if cost is not None else 0.0, mix_gpus(scenario, mix), order)


def mix_table(
    scenario: Scenario,
    rows: Sequence[Mapping[str, Any]],
    coverage: float | None,
    completed: float | None,
) -> pd.DataFrame:
    """Every mix and planner as one table row: the mix in words, its nodes per group, GPUs, cost
    per hour, real-time coverage, completed share (of the batch jobs), utilization (all and per
    GPU type), `meets` (every given target, no error), `cheapest` (that planner's cheapest mix
    meeting the targets) and `error`; in the order of the rows."""
    names = groups(scenario)
    types = list(dict.fromkeys(n.gpu_type for n in scenario.cluster.nodes))
    by_cost = priced(scenario)
    records = []
    for order, row in enumerate(rows):
        mix = row_mix(row, names)
        error = str(row.get(ERROR_COLUMN) or "")
        valid = not error
        record: dict[str, Any] = {  # (what a buyer reads first, first)
            "mix": mix_words(scenario, mix),
            "planner": row["planner"],
            "meets": valid and all(meets_targets(row, coverage, completed).values()),
            "cheapest": False,
            "gpus": mix_gpus(scenario, mix),
            "cost_per_hour": cost_per_hour(scenario, mix),
            "rt_coverage": row.get("rt_coverage") if valid else None,
            "completed_share": completed_fraction(row) if valid else None,
            "utilization": row.get("utilization") if valid else None,
            **{f"utilization_{t}": row.get(f"utilization_{t}") if valid else None for t in types},
            **{f"nodes_{g}": n for g, n in mix},
            "completed_jobs": row.get("completed_jobs") if valid else None,
            "batch_jobs": row.get("batch_jobs") if valid else None,
            "_rank": _rank(scenario, mix, order, by_cost),
            ERROR_COLUMN: error,
        }
        records.append(record)
    table = pd.DataFrame(records)
    if len(table):
        for _, part in table[table["meets"]].groupby("planner", sort=False):
            best = min(part.index, key=lambda i: table.at[i, "_rank"])
            table.at[best, "cheapest"] = True
    return table.drop(columns="_rank") if len(table) else table


def cheapest_first(table: pd.DataFrame) -> pd.DataFrame:
    """`mix_table` for reading: the mixes that hold the workload first, cheapest first (by
    cost per hour, then GPUs), the invalid ones after."""
    if not len(table):
        return table
    key = table.assign(_invalid=table[ERROR_COLUMN] != "")
    order = key.sort_values(["_invalid", "cost_per_hour", "gpus"], kind="stable").index
    return table.loc[order]


def cheapest_mixes(
    scenario: Scenario,
    table: pd.DataFrame,
    coverage: float | None,
    completed: float | None,
    planners: Sequence[str],
) -> list[dict[str, Any]]:
    """Per planner (in the order given): its cheapest mix meeting the targets (`nodes`
    {group: count}, `mix` in words, `gpus`, `cost_per_hour`), or `nodes` None and `missed`
    {target: why} naming what no mix reached."""
    names = groups(scenario)
    out = []
    for planner in planners:
        part = table[table["planner"] == planner]
        best = part[part["cheapest"]]
        entry: dict[str, Any] = {"planner": planner, "nodes": None, "mix": None}
        entry.update({"gpus": None, "cost_per_hour": None, "missed": {}})
        if len(best):
            row = best.iloc[0]
            entry.update(
                nodes={g: int(row[f"nodes_{g}"]) for g in names},
                mix=row["mix"],
                gpus=int(row["gpus"]),
                cost_per_hour=row["cost_per_hour"],
            )
        else:
            entry["missed"] = missed_targets(part, coverage, completed)
        out.append(entry)
    return out


def missed_targets(
    part: pd.DataFrame, coverage: float | None, completed: float | None
) -> dict[str, str]:
    """Target -> why no mix of one planner's rows meets the targets: the most any mix reached
    where one target is missed at every mix, or that each is met but never both at once."""
    valid = part[part[ERROR_COLUMN] == ""]
    if not len(valid):
        return {
            "mixes": "no mix tried can hold the workload (each one's reason is under Every mix "
            "tried)"
        }
    out = {}
    checks = (
        ("coverage", coverage, "rt_coverage", "real-time coverage", ".2%"),
        ("completed", completed, "completed_share", "completed batch jobs", ".1%"),
    )
    for name, target, column, words, fmt in checks:
        if target is None:
            continue
        top = valid.loc[valid[column].idxmax()]
        if top[column] < target - 1e-12:
            out[name] = (
                f"{words} below {target * 100:g}% at every mix tried: at most "
                f"{format(top[column], fmt)} ({top['mix']})"
            )
    if not out:
        out["both"] = (
            "each target is met by some mix, but no mix tried meets both: try more nodes of "
            "both groups at once"
        )
    return out


def reasons(entries: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Why each planner found no mix, as {reason: planners} (planners often miss alike)."""
    out: dict[str, list[str]] = {}
    for e in entries:
        for why in e["missed"].values():
            out.setdefault(why, []).append(e["planner"])
    return out


def answer(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The cheapest of the planners' answers (ties to the planner given first), or None when no
    planner's mix meets the targets."""
    found = [e for e in entries if e["nodes"] is not None]
    if not found:
        return None
    return min(
        found,
        key=lambda e: (
            e["cost_per_hour"] if e["cost_per_hour"] is not None else 0.0,
            e["gpus"],
        ),
    )


def answer_words(
    scenario: Scenario, best: Mapping[str, Any] | None, label: str | None = None
) -> str:
    """The headline: what to buy, its GPUs per type and cost per hour."""
    if best is None:
        return "No mix tried meets the targets."
    per_node = {n.group: n for n in scenario.cluster.nodes}
    parts = [
        f"{count} x {per_node[g].gpus_per_node} {per_node[g].gpu_type} ({g})"
        for g, count in best["nodes"].items()
        if count
    ]
    cost = f", {best['cost_per_hour']:,.2f} per hour" if best["cost_per_hour"] is not None else ""
    by = f" with {label}" if label else ""
    return f"{' + '.join(parts)} = {best['gpus']} GPUs{cost}{by}"


def chart_points(table: pd.DataFrame, ranked_by: str) -> pd.DataFrame:
    """The valid rows of `mix_table` with `x` (cost per hour, or GPUs where mixes are ranked by
    GPUs) and the hover text naming the mix."""
    valid = table[table[ERROR_COLUMN] == ""].copy()
    valid["x"] = valid["gpus"] if ranked_by == "gpus" else valid["cost_per_hour"]
    valid["hover"] = [
        f"{r.mix} ({r.gpus} GPUs"
        + (f", {r.cost_per_hour:,.2f}/h" if pd.notna(r.cost_per_hour) else "")
        + f")<br>coverage {r.rt_coverage:.2%}, completed {r.completed_share:.0%}"
        + f" ({int(r.completed_jobs)}/{int(r.batch_jobs)})"
        + ("<br>meets the targets" if r.meets else "<br>misses a target")
        for r in valid.itertuples()
    ]
    return valid


def rows_for_csv(table: pd.DataFrame, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sweep rows with the mix in words and `meets` (for sweep.csv)."""
    return [
        {"mix": mix, **row, "meets": bool(meets)}
        for mix, meets, row in zip(table["mix"], table["meets"], rows, strict=True)
    ]
