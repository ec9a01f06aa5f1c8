"""Mixes of node groups (SPEC section 8): a scenario on other node counts, what a mix costs per
hour, and the cheapest mix that meets the coverage and completion targets (`size --vary`).

A mix gives some groups another node count (`{group: count}`); the others keep theirs. Moving a
scenario to a mix keeps every GPU's place within its group: a running block or a previous
real-time GPU at local index l of group k moves to the group's new offset + l. Running work
whose nodes no longer exist is placed again on the first free legal block of its size in an
allowed group (where work runs on a cluster of another size is no fact), and the scenario is
validated again: running work that fits nowhere is an error naming the job.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .model import BatchJob, RealtimeJob, Scenario, ScenarioError
from .nodes import block_starts, groups_of
from .sweep import _largest_power_of_two

Mix = tuple[tuple[str, int], ...]  # (group, node count) pairs, in the cluster's group order


def parse_vary(
    specs: Sequence[str], scenario: Scenario, flag: str = "--vary"
) -> dict[str, list[int]]:
    """`GROUP=LIST` specs ("a10x4=0,2,4") as {group: counts}, each group of the scenario's
    cluster, named once, with whole counts >= 0."""
    names = [n.group for n in scenario.cluster.nodes]
    if not names:
        raise ScenarioError(
            f"{flag}: the cluster has no node groups to vary (give it nodes, e.g. with --cluster "
            f"FILE.json); vary its size with --gpus instead"
        )
    out: dict[str, list[int]] = {}
    for spec in specs:
        group, sep, values = spec.partition("=")
        group = group.strip()
        if not sep or not values.strip():
            raise ScenarioError(f"{flag}: {spec!r} is not GROUP=LIST (e.g. {names[0]}=1,2,4)")
        if group not in names:
            raise ScenarioError(
                f"{flag}: no group {group!r} in the cluster (groups: {', '.join(names)})"
            )
        if group in out:
            raise ScenarioError(f"{flag}: group {group!r} is given twice")
        counts = []
        for part in values.split(","):
            part = part.strip()
            if not part.isdigit():
                raise ScenarioError(
                    f"{flag}: {group}: {part!r} is not a whole number of nodes >= 0"
                )
            counts.append(int(part))
        out[group] = sorted(set(counts))
    return out


def mixes(scenario: Scenario, vary: Mapping[str, Sequence[int]]) -> list[Mix]:
    """Every combination of the varied groups' counts (the others at their own), in the
    cluster's group order."""
    lists = [list(vary[n.group]) if n.group in vary else [n.count] for n in scenario.cluster.nodes]
    names = [n.group for n in scenario.cluster.nodes]
    return [tuple(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]


def mix_gpus(scenario: Scenario, mix: Mix) -> int:
    per_node = {n.group: n.gpus_per_node for n in scenario.cluster.nodes}
    return sum(per_node[g] * count for g, count in mix)


def cost_per_hour(scenario: Scenario, mix: Mix | None = None) -> float | None:
    """What the mix's GPUs cost an hour: each type's price, else the policy's; None when some
    GPU has neither."""
    c = scenario.cluster
    counts = dict(mix) if mix is not None else {n.group: n.count for n in c.nodes}
    total = 0.0
    for n in c.nodes:
        gtype = c.gpu_type(n.gpu_type)
        price = gtype.cost_per_gpu_hour if gtype is not None else None
        if price is None:
            price = scenario.policy.gpu_hour_cost
        gpus = counts.get(n.group, n.count) * n.gpus_per_node
        if price is None:
            if gpus:
                return None
            continue
        total += gpus * price
    return total


def with_nodes(scenario: Scenario, mix: Mix | Mapping[str, int]) -> Scenario:
    """The scenario on the mix's node counts (see the module docstring)."""
    counts = dict(mix)
    c = scenario.cluster
    if not c.nodes:
        raise ScenarioError("the cluster has no node groups to vary")
    old = groups_of(c)
    nodes = tuple(replace(n, count=int(counts.get(n.group, n.count))) for n in c.nodes)
    gpus = sum(n.gpus for n in nodes)
    if gpus < 1:
        raise ScenarioError(f"mix {_mix_words(nodes)}: holds no GPUs")
    cluster = replace(c, gpus=gpus, nodes=nodes)
    new = groups_of(cluster)

    def moved(g: int) -> int | None:
        """GPU g's place on the new cluster (None where its node is gone)."""
        group = next(x for x in old if x.offset <= g < x.end)
        local = g - group.offset
        target = new[group.index]
        return target.offset + local if local < target.gpus else None

    jobs: list = []
    lost: set[int] = set()  # running jobs whose nodes are gone
    for job in scenario.jobs:
        if isinstance(job, BatchJob):
            high = min(job.gpus_max, _largest_power_of_two(gpus))
            job = replace(job, gpus_max=high, gpus_min=min(job.gpus_min, high))
            if job.running is not None:
                first = moved(job.running.gpu_start)
                last = moved(job.running.gpu_start + job.running.gpus - 1)
                if first is None or last is None:
                    lost.add(len(jobs))
                else:
                    job = replace(job, running=replace(job.running, gpu_start=first))
        elif isinstance(job, RealtimeJob):
            previous = job.previous_gpus
            if previous is not None:
                previous = tuple(m for m in (moved(g) for g in previous) if m is not None)
            high = min(job.gpus_max, gpus)
            job = replace(
                job, gpus_max=high, gpus_min=min(job.gpus_min, high), previous_gpus=previous
            )
        jobs.append(job)
    jobs = _running_placed_again(jobs, lost, cluster)
    try:
        return replace(scenario, cluster=cluster, jobs=tuple(jobs))
    except ScenarioError as e:
        raise e.with_prefix(f"mix {_mix_words(nodes)}") from None


def _running_placed_again(jobs: list, lost: set[int], cluster) -> list:
    """The running jobs of `lost` (their nodes are gone) on the first free legal block of
    their size in an allowed group, largest first."""
    taken = 0
    for k, job in enumerate(jobs):
        if isinstance(job, BatchJob) and job.running is not None and k not in lost:
            taken |= ((1 << job.running.gpus) - 1) << job.running.gpu_start
        elif isinstance(job, RealtimeJob):
            for g in job.previous_gpus or ():
                taken |= 1 << g
    out = list(jobs)
    for k in sorted(lost, key=lambda k: -jobs[k].running.gpus):
        job = jobs[k]
        g = job.running.gpus
        starts = block_starts(cluster, job, g)
        block = (1 << g) - 1
        place = next(
            (b for b in range(cluster.gpus) if starts >> b & 1 and not (taken >> b) & block),
            None,
        )
        if place is None:
            raise ScenarioError(
                f"job '{job.id}': running block of {g} GPUs fits on no free block of its allowed "
                f"groups on this mix"
            )
        taken |= block << place
        out[k] = replace(job, running=replace(job.running, gpu_start=place))
    return out


def _mix_words(nodes) -> str:
    return ", ".join(f"{n.group}={n.count}" for n in nodes)


def size_mix(
    scenario: Scenario,
    vary: Mapping[str, Sequence[int]],
    coverage: float | None,
    completed: float | None,
    planner: str,
    options: Mapping[str, Any] | None = None,
    progress: Callable[[Mix, dict[str, Any]], None] | None = None,
    evaluate: Callable[[Scenario, Mix], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The cheapest mix that meets every given target: the mixes are planned from the
    cheapest up (by cost per hour, GPUs where no price is set; ties to fewer GPUs, then the
    order given) and the first that meets the targets is the answer, every cheaper one having
    missed. Returns `nodes` ({group: count}), `gpus`, `cost_per_hour` (None for the answer when
    a GPU has no price, and `ranked_by` says "gpus"), `planner`, `targets` and every mix tried
    with its metrics and `meets`."""
    from .sweep import meets_targets, run_point_on

    all_mixes = mixes(scenario, vary)
    if not all_mixes:
        raise ScenarioError("size: no mix to try")
    costs = {m: cost_per_hour(scenario, m) for m in all_mixes}
    priced = all(v is not None for v in costs.values())
    order = sorted(
        range(len(all_mixes)),
        key=lambda i: (
            costs[all_mixes[i]] if priced else 0.0,
            mix_gpus(scenario, all_mixes[i]),
            i,
        ),
    )
    tried, answer = [], None
    for i in order:
        mix = all_mixes[i]
        if mix_gpus(scenario, mix) < 1:
            continue
        row = (
            evaluate(scenario, mix)
            if evaluate is not None
            else run_point_on(scenario, lambda s, m=mix: with_nodes(s, m), planner, options)
        )
        row.update({f"nodes_{g}": n for g, n in mix})
        row["gpus"] = mix_gpus(scenario, mix)
        row["cost_per_hour"] = costs[mix]
        meets = meets_targets(row, coverage, completed)
        row["meets"] = all(meets.values()) and not row.get("error")
        tried.append(row)
        if progress is not None:
            progress(mix, row)
        if row["meets"]:
            answer = mix
            break
    targets = {k: v for k, v in (("coverage", coverage), ("completed", completed)) if v is not None}
    return {
        "nodes": dict(answer) if answer is not None else None,
        "gpus": mix_gpus(scenario, answer) if answer is not None else None,
        "cost_per_hour": costs[answer] if answer is not None else None,
        "ranked_by": "cost_per_hour" if priced else "gpus",
        "planner": planner,
        "targets": targets,
        "tried": tried,
    }
