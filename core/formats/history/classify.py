"""Each job's type, real-time group and priority from the rules; printable unique ids."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .options import ImportRules


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


def _rt_id(group: str, taken: set[str]) -> str:
    base = "rt-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", str(group)).strip("-")[:60] or "service")
    job_id, n = base, 2
    while job_id in taken:
        job_id, n = f"{base}-{n}", n + 1
    return job_id
