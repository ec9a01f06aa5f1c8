"""What the caller chooses: the window to plan and the rules mapping trace fields to job types
and priorities."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ...model import (
    BATCH_TYPES,
    IMPORT_STEP_MINUTES,
    JOB_TYPES,
    MAX_GPUS,
    MAX_STEPS,
    REALTIME_TYPE,
    Cluster,
    ScenarioError,
)
from ..text import json_error, read_text
from .table import RULE_FIELDS

DEFAULT_STEP_MINUTES = IMPORT_STEP_MINUTES  # (the as-run is scored on the same grid)


@dataclass(frozen=True)
class ImportWindow:
    """The period to plan: `start` is an ISO time, or hours from the trace start for traces with
    relative times (openb); None picks the day holding the median submit time."""

    start: str | float | datetime | None = None
    days: float = 1.0
    step_minutes: int = DEFAULT_STEP_MINUTES
    gpus: int | None = None
    # SPEC section 8 (`--cluster FILE.json`): the node groups and GPU types to plan on; the
    # jobs' types must name its types. Its GPUs replace the peak in use; --gpus wins over it.
    cluster: Cluster | None = None

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
