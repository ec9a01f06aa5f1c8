"""`kubectl get pods -A -o json`: a Kubernetes pod list.

GPUs are the sum over containers of `resources.requests["nvidia.com/gpu"]` (the limit where no
request is given: Kubernetes sets one from the other for extended resources). Submitted at
`metadata.creationTimestamp`; started at the earliest container `startedAt`, else at the
`PodScheduled` condition; ended at the latest `finishedAt` once every container terminated
(a pod still running has no end). The namespace stands for the partition and, unless a `team`
label is set, for the team; `status.qosClass`, `spec.priorityClassName` and `spec.priority` feed
the priority rules.

GPU types (SPEC section 8): a `spec.nodeSelector` on `nvidia.com/gpu.product` (the label NVIDIA's
GPU feature discovery sets) gives the pod's `gpu_types`, as does a required node affinity on it:
the `In` values of its `nodeSelectorTerms` (terms are alternatives: a term without the key
allows any product); both given, the products both allow. `NotIn`, `Exists` and preferred
affinities do not restrict the types. The list has no nodes: the types are planned on a cluster
given with `--cluster FILE.json` and ignored (with a note) without one
(`core.formats.history.typed`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..model import MAX_GPUS, ScenarioError
from .history import (
    TraceInfo,
    as_text,
    check_order,
    empty_table,
    history_reader,
    parse_numbers,
    parse_times,
    read_source,
)
from .text import json_error

FORMAT = "kubectl"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT = "nvidia.com/gpu.product"


def sniff(name: str, head: str) -> bool:
    text = head.lstrip("\ufeff \t\r\n")
    return (
        text.startswith("{") and '"items"' in head and ('"Pod"' in head or '"pods"' in head.lower())
    )


def read_table(
    source: str | bytes | Path, name: str | None = None
) -> tuple[pd.DataFrame, TraceInfo]:
    shown, path, _ = read_source(source, name)
    try:
        text = path.read_text(encoding="utf-8-sig") if path is not None else as_text(source)
        raw = json.loads(text)
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{shown}: is not UTF-8 text (byte {e.start} cannot be read)") from None
    except json.JSONDecodeError as e:
        raise json_error(shown, e) from None
    items = raw.get("items") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise ScenarioError(f"{shown}: expected the pod list of `kubectl get pods -A -o json`")
    # JSON is nested, so flattening it is a loop over pods; the mapping after it is vectorised
    records = [_flatten(shown, i, pod) for i, pod in enumerate(items)]
    n = len(records)
    frame = pd.DataFrame.from_records(
        records,
        columns=[
            "name",
            "namespace",
            "team",
            "qos",
            "priority_class",
            "priority",
            "phase",
            "gpus",
            "created",
            "started",
            "scheduled",
            "finished",
            "gpu_types",
        ],
    ).astype("str")
    rows = np.arange(n)
    table = empty_table(n)
    table["row"] = rows
    table["job_id"] = (frame["namespace"] + "/" + frame["name"]).to_numpy()
    table["name"] = frame["name"].to_numpy()
    table["partition"] = frame["namespace"].to_numpy()
    table["team"] = frame["team"].where(frame["team"] != "", frame["namespace"]).to_numpy()
    table["qos"] = frame["qos"].to_numpy()
    table["priority_class"] = frame["priority_class"].to_numpy()
    table["state"] = frame["phase"].str.upper().to_numpy()
    table["gpu_types"] = frame["gpu_types"].to_numpy()
    table["gpus"] = parse_numbers(frame["gpus"], shown, GPU_RESOURCE, rows, maximum=MAX_GPUS)
    table["priority_raw"] = parse_numbers(
        frame["priority"], shown, "spec.priority", rows, minimum=None
    )
    table["submit"] = parse_times(frame["created"], shown, "creationTimestamp", rows)
    started = parse_times(frame["started"], shown, "startedAt", rows)
    scheduled = parse_times(frame["scheduled"], shown, "PodScheduled", rows)
    table["start"] = np.where(np.isfinite(started), started, scheduled)
    table["end"] = parse_times(frame["finished"], shown, "finishedAt", rows)
    check_order(table, shown, "startedAt", "finishedAt")
    info = TraceInfo(name=shown, format=FORMAT, rows=n)
    stamps = table[["submit", "start", "end"]].to_numpy().ravel()
    stamps = stamps[np.isfinite(stamps)]
    info.end = float(stamps.max()) if len(stamps) else float("nan")
    info.notes.append("pods are numbered from 0 in the order of `items` (row = item number)")
    return table, info


read_history = history_reader(read_table)


def _flatten(name: str, i: int, pod: Any) -> dict[str, str]:
    if not isinstance(pod, dict):
        raise ScenarioError(f"{name}: row {i}: an item is not a pod object")
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    labels = meta.get("labels") or {}
    gpus = 0.0
    for container in spec.get("containers") or []:
        resources = (container or {}).get("resources") or {}
        value = (resources.get("requests") or {}).get(GPU_RESOURCE)
        if value is None:
            value = (resources.get("limits") or {}).get(GPU_RESOURCE)
        if value is None:
            continue
        try:
            gpus += float(value)
        except (TypeError, ValueError):
            raise ScenarioError(
                f"{name}: row {i}: {GPU_RESOURCE} must be a number, got {value!r}"
            ) from None
    scheduled = ""
    for condition in status.get("conditions") or []:
        if (condition or {}).get("type") == "PodScheduled" and condition.get("status") == "True":
            scheduled = condition.get("lastTransitionTime") or ""
    starts, finishes, all_done = [], [], True
    statuses = status.get("containerStatuses") or []
    for cs in statuses:
        state = (cs or {}).get("state") or {}
        if "running" in state:
            starts.append((state["running"] or {}).get("startedAt") or "")
            all_done = False
        elif "terminated" in state:
            term = state["terminated"] or {}
            starts.append(term.get("startedAt") or "")
            finishes.append(term.get("finishedAt") or "")
        else:
            all_done = False
    starts = [s for s in starts if s]
    finished = max(finishes) if finishes and all_done and statuses else ""
    if not finished and status.get("phase") in ("Succeeded", "Failed"):
        finished = meta.get("deletionTimestamp") or ""
    return {
        "name": str(meta.get("name") or f"pod-{i}"),
        "namespace": str(meta.get("namespace") or "default"),
        "team": str(labels.get("team") or ""),
        "qos": str(status.get("qosClass") or ""),
        "priority_class": str(spec.get("priorityClassName") or ""),
        "priority": "" if spec.get("priority") is None else str(spec.get("priority")),
        "phase": str(status.get("phase") or ""),
        "gpus": f"{gpus:g}",
        "created": str(meta.get("creationTimestamp") or ""),
        "started": min(starts) if starts else "",
        "scheduled": scheduled,
        "finished": finished,
        "gpu_types": "|".join(_products(name, i, spec)),
    }


def _products(name: str, i: int, spec: dict) -> list[str]:
    """The GPU products the pod's nodeSelector and required node affinity allow ([] = any)."""
    selector = (spec.get("nodeSelector") or {}).get(GPU_PRODUCT)
    allowed = None if selector is None else [_label(name, i, "nodeSelector", selector)]
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms") or [] if isinstance(affinity, dict) else []
    union: list[str] | None = []
    for term in terms:
        values = None
        for expr in (term or {}).get("matchExpressions") or []:
            if (expr or {}).get("key") != GPU_PRODUCT or expr.get("operator") != "In":
                continue
            field_name = "nodeAffinity matchExpressions values"
            these = [_label(name, i, field_name, v) for v in expr.get("values") or []]
            values = these if values is None else [v for v in values if v in these]
        if values is None:
            union = None  # a term that allows any product
            break
        union += [v for v in values if v not in union]
    if union is not None and terms:
        allowed = union if allowed is None else [v for v in allowed if v in union]
    if allowed is not None and not allowed:
        raise ScenarioError(
            f"{name}: row {i}: nodeSelector and nodeAffinity on {GPU_PRODUCT} allow no GPU "
            "product (the pod could run nowhere)"
        )
    return allowed or []


def _label(name: str, i: int, field_name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or "|" in value:
        raise ScenarioError(
            f"{name}: row {i}: {field_name} {GPU_PRODUCT} must be a product name, got {value!r}"
        )
    return value.strip()
