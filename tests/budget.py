"""Hypothesis budgets that follow the chosen profile.

A property states its budget for the full suite (`examples(300)`); the profile scales it.
conftest.py registers the profiles: `ci` (the full suite, `bash scripts/test`) keeps every
budget as written, `dev` (the fast loop, `bash scripts/test --fast`) runs a tenth of each,
at least 3. Pick one with pytest's `--hypothesis-profile=NAME`.
"""

from __future__ import annotations

from hypothesis import settings

FULL = 100  # the ci profile's max_examples: budgets are written for it


def examples(full: int) -> int:
    """The number of examples for a property whose full-suite budget is `full`."""
    return max(3, full * settings.default.max_examples // FULL)
