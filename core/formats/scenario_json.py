"""The scenario JSON of SPEC section 3: read strictly (unknown fields, duplicate keys, nesting),
written exactly (JSON -> Scenario -> JSON is the identity)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ..model import (
    JOB_TYPES,
    MAX_DEMAND,
    REALTIME_TYPE,
    BatchJob,
    Cluster,
    Job,
    Policy,
    RealtimeJob,
    Running,
    Scenario,
    ScenarioError,
    clipped,
    shown,
)
from ..nodes import GpuType, NodeGroup
from .cells import plain_number
from .text import json_error

FORMAT = "json"

_CLUSTER_KEYS = {"gpus", "step_minutes", "horizon_steps", "start", "gpu_types", "nodes"}
_TYPE_KEYS = {"speed", "memory_gb", "cost_per_gpu_hour"}
_NODE_KEYS = {"group", "gpu_type", "gpus_per_node", "count"}
_TYPED_KEYS = {"gpu_types", "min_gpu_memory_gb"}  # section 8, on every job
_POLICY_KEYS = {
    "penalty_weight",
    "decay",
    "reward_weight",
    "rt_coverage_target",
    "gpu_hour_cost",
}
_BATCH_KEYS = {
    "id",
    "type",
    "priority",
    "arrival_step",
    "gpus_min",
    "gpus_max",
    "gpu_hours",
    "running",
    "gpu_hours_actual",
    "team",
    "deadline_step",
    *_TYPED_KEYS,
    "speed",
    "multi_node",
}
_REALTIME_KEYS = {
    "id",
    "type",
    "priority",
    "gpus_min",
    "gpus_max",
    "swap_cap",
    "demand",
    "previous_gpus",
    "history",
    "team",
    *_TYPED_KEYS,
}
_RUNNING_KEYS = {"gpu_start", "gpus", "remaining_steps"}


def sniff(name: str, head: str) -> bool:
    """A .json file, or any file whose text starts with an object."""
    return name.lower().endswith(".json") or head.lstrip().startswith("{")


def read(text: str, name: str = "scenario.json") -> Scenario:
    return scenario_from_json(text, name)


def scenario_from_json(text: str, name: str = "scenario.json") -> Scenario:
    raw = parse_json(text, name)
    try:
        return scenario_from_dict(raw)
    except ScenarioError as e:
        raise e.with_prefix(name) from None


def parse_json(text: str, name: str) -> Any:
    """json.loads that refuses duplicate keys and names what broke instead of raising past us."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise json_error(name, e) from None
    except RecursionError:
        raise ScenarioError(f"{name}: not valid JSON: nested too deeply") from None
    except _DuplicateKey as e:
        raise ScenarioError(f"{name}: key {e.key!r} appears twice in one object") from None
    except ValueError:  # an integer with more digits than Python converts
        raise ScenarioError(
            f"{name}: a number in it has more than 4,300 digits (no number here is above 1e15)"
        ) from None


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def scenario_from_dict(raw: Any) -> Scenario:
    if not isinstance(raw, dict):
        raise ScenarioError("the top level must be an object with cluster, policy and jobs")
    _no_unknown("scenario", raw, {"name", "description", "cluster", "policy", "jobs"})
    cluster_raw = _mapping("cluster", raw.get("cluster"))
    # The cluster is validated (limits included) before any job is looked at.
    cluster = cluster_from_dict(cluster_raw)
    policy_raw = _mapping("policy", raw.get("policy", {}))
    _no_unknown("policy", policy_raw, _POLICY_KEYS)
    policy = Policy(**policy_raw)
    jobs_raw = raw.get("jobs")
    if not isinstance(jobs_raw, list):
        raise ScenarioError("scenario: jobs must be a list of job objects")
    jobs, problems = [], []
    for k, job_raw in enumerate(jobs_raw):
        try:
            jobs.append(job_from_dict(job_raw, k))
        except ScenarioError as e:
            problems.extend(e.problems)
    if problems:
        raise ScenarioError("; ".join(problems[:5]), problems)
    name = raw.get("name", "scenario")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError("scenario: description must be a string")
    return Scenario(
        name=name if isinstance(name, str) else str(name),
        cluster=cluster,
        jobs=tuple(jobs),
        policy=policy,
        description=description,
    )


def cluster_from_dict(raw: dict) -> Cluster:
    """The `cluster` object (also what `--cluster FILE.json` holds): section 8's gpu_types and
    nodes when given, and then `gpus` may be left out."""
    _no_unknown("cluster", raw, _CLUSTER_KEYS)
    types, groups = _types_and_nodes(raw)
    if groups:
        total = sum(g.gpus_per_node * g.count for g in groups)
        gpus = raw.get("gpus", total)
    else:
        _require("cluster", raw, ("gpus",))
        gpus = raw["gpus"]
    return Cluster(
        gpus=gpus,
        step_minutes=raw.get("step_minutes", 60),
        horizon_steps=raw.get("horizon_steps", 24),
        start=_timestamp("cluster", "start", raw.get("start")),
        gpu_types=types,
        nodes=groups,
    )


def _types_and_nodes(raw: dict) -> tuple[tuple[GpuType, ...], tuple[NodeGroup, ...]]:
    types_raw = _mapping("cluster: gpu_types", raw.get("gpu_types", {}))
    types = []
    for name, spec in types_raw.items():
        owner = f"cluster: gpu type {clipped(name)!r}"
        spec = _mapping(owner, spec)
        _no_unknown(owner, spec, _TYPE_KEYS)
        for key, value in spec.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ScenarioError(f"{owner}: {key} must be a number, got {clipped(repr(value))}")
        types.append(GpuType(name, **spec))
    nodes_raw = raw.get("nodes", [])
    if not isinstance(nodes_raw, list):
        raise ScenarioError("cluster: nodes must be a list of node groups")
    groups = []
    for k, node in enumerate(nodes_raw):
        node = _mapping(f"cluster: nodes[{k}]", node)
        _no_unknown(f"cluster: nodes[{k}]", node, _NODE_KEYS)
        _require(f"cluster: nodes[{k}]", node, ("group", "gpu_type", "gpus_per_node", "count"))
        for key in ("gpus_per_node", "count"):
            value = node[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ScenarioError(
                    f"cluster: group {clipped(str(node['group']))!r}: {key} must be a number, "
                    f"got {clipped(repr(value))}"
                )
        groups.append(NodeGroup(**node))
    return tuple(types), tuple(groups)


def cluster_to_dict(c: Cluster) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "gpus": c.gpus,
        "step_minutes": c.step_minutes,
        "horizon_steps": c.horizon_steps,
    }
    if c.start is not None:
        cluster["start"] = c.start.isoformat()
    if c.nodes:
        cluster["gpu_types"] = {
            t.name: {
                "speed": plain_number(t.speed),
                **{
                    key: plain_number(getattr(t, key))
                    for key in ("memory_gb", "cost_per_gpu_hour")
                    if getattr(t, key) is not None
                },
            }
            for t in c.gpu_types
        }
        cluster["nodes"] = [
            {
                "group": n.group,
                "gpu_type": n.gpu_type,
                "gpus_per_node": n.gpus_per_node,
                "count": n.count,
            }
            for n in c.nodes
        ]
    return cluster


def _typed_fields(owner: str, raw: dict) -> dict[str, Any]:
    """A job's section 8 fields as the model takes them."""
    out: dict[str, Any] = {}
    if raw.get("gpu_types") is not None:
        if not isinstance(raw["gpu_types"], list):
            raise ScenarioError(f"{owner}: gpu_types must be a list of GPU type names")
        out["gpu_types"] = tuple(raw["gpu_types"])
    if raw.get("min_gpu_memory_gb") is not None:
        out["min_gpu_memory_gb"] = raw["min_gpu_memory_gb"]
    if raw.get("speed") is not None:
        out["speed"] = tuple(_mapping(f"{owner}: speed", raw["speed"]).items())
    if "multi_node" in raw:
        out["multi_node"] = raw["multi_node"]
    return out


def _typed_to_dict(job: Job, out: dict[str, Any]) -> None:
    if job.gpu_types is not None:
        out["gpu_types"] = list(job.gpu_types)
    if job.min_gpu_memory_gb is not None:
        out["min_gpu_memory_gb"] = plain_number(job.min_gpu_memory_gb)
    if isinstance(job, BatchJob):
        if job.speed is not None:
            out["speed"] = {name: plain_number(f) for name, f in job.speed}
        if not job.multi_node:
            out["multi_node"] = False


def job_from_dict(raw: Any, position: int) -> Job:
    """One job object of the JSON (also what the CSV pair's and the editor's rows become)."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"jobs[{position}]: must be an object")
    owner = f"job '{shown(raw['id'])}'" if isinstance(raw.get("id"), str) else f"jobs[{position}]"
    _require(owner, raw, ("id", "type", "priority"))
    job_type = raw["type"]
    if job_type not in JOB_TYPES:
        # shown as the JSON has it (null, 3, "gaming"), and not at any length
        if isinstance(job_type, dict | list):
            given = "an object" if isinstance(job_type, dict) else "a list"
        else:
            given = clipped(json.dumps(job_type))
        raise ScenarioError(f"{owner}: type {given} is not one of {', '.join(JOB_TYPES)}")
    if job_type == REALTIME_TYPE:
        _no_unknown(owner, raw, _REALTIME_KEYS)
        _require(owner, raw, ("gpus_min", "gpus_max", "swap_cap", "demand"))
        previous = raw.get("previous_gpus")
        if previous is not None and not isinstance(previous, list):
            raise ScenarioError(f"{owner}: previous_gpus must be a list of GPU numbers")
        history = raw.get("history")
        if history is not None and not isinstance(history, list):
            raise ScenarioError(f"{owner}: history must be a list of numbers")
        job = RealtimeJob(
            id=raw["id"],
            priority=raw["priority"],
            gpus_min=raw["gpus_min"],
            gpus_max=raw["gpus_max"],
            swap_cap=raw["swap_cap"],
            demand=_list(owner, "demand", raw["demand"]),
            previous_gpus=tuple(previous) if previous is not None else None,
            history=tuple(history) if history is not None else None,
            team=raw.get("team"),
            **_typed_fields(owner, raw),
        )
        for field in ("demand", "history"):
            for i, value in enumerate(getattr(job, field) or ()):
                if value > MAX_DEMAND:
                    raise ScenarioError(
                        f"{owner}: {field}[{i}] {value:g} exceeds the limit of {MAX_DEMAND:g}"
                    )
        return job
    _no_unknown(owner, raw, _BATCH_KEYS)
    _require(owner, raw, ("gpus_min", "gpus_max", "gpu_hours"))
    running = None
    if raw.get("running") is not None:
        running_raw = _mapping(f"{owner}: running", raw["running"])
        _no_unknown(f"{owner}: running", running_raw, _RUNNING_KEYS)
        _require(f"{owner}: running", running_raw, tuple(sorted(_RUNNING_KEYS)))
        running = Running(**running_raw)
    return BatchJob(
        id=raw["id"],
        type=job_type,
        priority=raw["priority"],
        gpus_min=raw["gpus_min"],
        gpus_max=raw["gpus_max"],
        gpu_hours=raw["gpu_hours"],
        arrival_step=raw.get("arrival_step", 0),
        running=running,
        gpu_hours_actual=raw.get("gpu_hours_actual"),
        team=raw.get("team"),
        deadline_step=raw.get("deadline_step"),
        **_typed_fields(owner, raw),
    )


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    cluster = cluster_to_dict(scenario.cluster)
    p = scenario.policy
    return {
        "name": scenario.name,
        "description": scenario.description,
        "cluster": cluster,
        "policy": {
            "penalty_weight": plain_number(p.penalty_weight),
            "decay": plain_number(p.decay),
            "reward_weight": plain_number(p.reward_weight),
            **{
                key: plain_number(getattr(p, key))
                for key in ("rt_coverage_target", "gpu_hour_cost")
                if getattr(p, key) is not None
            },
        },
        "jobs": [job_to_dict(job) for job in scenario.jobs],
    }


def job_to_dict(job: Job) -> dict[str, Any]:
    if isinstance(job, RealtimeJob):
        out: dict[str, Any] = {
            "id": job.id,
            "type": job.type,
            "priority": plain_number(job.priority),
            "gpus_min": job.gpus_min,
            "gpus_max": job.gpus_max,
            "swap_cap": job.swap_cap,
            "demand": [plain_number(d) for d in job.demand],
        }
        if job.previous_gpus is not None:
            out["previous_gpus"] = list(job.previous_gpus)
        if job.history is not None:
            out["history"] = [None if math.isnan(h) else plain_number(h) for h in job.history]
        if job.team is not None:
            out["team"] = job.team
        _typed_to_dict(job, out)
        return out
    out = {
        "id": job.id,
        "type": job.type,
        "priority": plain_number(job.priority),
        "arrival_step": job.arrival_step,
        "gpus_min": job.gpus_min,
        "gpus_max": job.gpus_max,
        "gpu_hours": plain_number(job.gpu_hours),
    }
    if job.gpu_hours_actual is not None:
        out["gpu_hours_actual"] = plain_number(job.gpu_hours_actual)
    if job.team is not None:
        out["team"] = job.team
    if job.deadline_step is not None:
        out["deadline_step"] = job.deadline_step
    _typed_to_dict(job, out)
    if job.running is not None:
        r = job.running
        out["running"] = {
            "gpu_start": r.gpu_start,
            "gpus": r.gpus,
            "remaining_steps": r.remaining_steps,
        }
    return out


def scenario_to_json(scenario: Scenario) -> str:
    return json.dumps(scenario_to_dict(scenario), indent=2) + "\n"


def _mapping(owner: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(f"{owner}: must be an object, got {type(value).__name__}")
    return value


def _require(owner: str, raw: dict, keys: Iterable[str]) -> None:
    for key in keys:
        if key not in raw:
            raise ScenarioError(f"{owner}: missing field '{key}'")


def _no_unknown(owner: str, raw: dict, allowed: set[str]) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ScenarioError(
            f"{owner}: unknown field{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}"
        )


def _list(owner: str, field: str, value: Any) -> tuple:
    if not isinstance(value, list):
        raise ScenarioError(f"{owner}: {field} must be a list of numbers")
    return tuple(value)


def _timestamp(owner: str, field: str, value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ScenarioError(f"{owner}: {field} must be an ISO timestamp string")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ScenarioError(f"{owner}: {field} {value!r} is not an ISO timestamp") from None
