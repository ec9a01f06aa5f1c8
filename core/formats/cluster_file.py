"""`--cluster FILE.json` (SPEC section 8): a `cluster` object that replaces a scenario's cluster.

The file holds a cluster object as a scenario's `cluster` (or a whole scenario, whose cluster is
taken). Its GPUs, types and nodes replace the scenario's; `step_minutes`, `horizon_steps` and
`start` are taken where the file gives them and kept otherwise, so one cluster file serves every
window of a history. The scenario is validated again on its new cluster: a job no allowed group
can hold, or a running block across a node boundary, is named with its field.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..model import Cluster, Scenario, ScenarioError
from .scenario_json import cluster_from_dict, parse_json
from .text import read_text


def read_cluster_file(path: Path) -> dict:
    """The cluster object of a file (a cluster, or a scenario with one)."""
    raw = parse_json(read_text(path), path.name)
    if isinstance(raw, dict) and isinstance(raw.get("cluster"), dict):
        raw = raw["cluster"]
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path.name}: must hold a cluster object (gpus or nodes)")
    try:
        cluster_from_dict({"horizon_steps": 1, **raw})  # checked on its own first
    except ScenarioError as e:
        raise e.with_prefix(path.name) from None
    return raw


def with_cluster(scenario: Scenario, raw: dict, name: str = "cluster file") -> Scenario:
    """The scenario on the cluster `raw` describes (its own step, horizon and start where the
    cluster object leaves them out)."""
    c = scenario.cluster
    merged = {
        "step_minutes": c.step_minutes,
        "horizon_steps": c.horizon_steps,
        **({"start": c.start.isoformat()} if c.start is not None else {}),
        **raw,
    }
    try:
        cluster: Cluster = cluster_from_dict(merged)
        return dataclasses.replace(scenario, cluster=cluster)
    except ScenarioError as e:
        raise e.with_prefix(name) from None


def nodes_of_file(path: Path) -> Cluster:
    """A cluster file's cluster, for an import: its types and node groups (the window gives
    the step and horizon)."""
    return cluster_from_dict({"horizon_steps": 1, **read_cluster_file(path)})
