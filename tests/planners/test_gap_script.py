"""scripts/allocator_gap.py: its draws by path and its allocator overrides (the measurement
behind the README's gap tables; the script itself is not a test)."""

from __future__ import annotations

import runpy

import pytest

from core.bench import small_case
from core.planners.allocator import AllocatorParams, search_effort
from tests.paths import ROOT

GAP = runpy.run_path(str(ROOT / "scripts" / "allocator_gap.py"), run_name="allocator_gap")


def test_overrides_become_allocator_params():
    params = GAP["_params"](["restart_work=1000000000", "restarts=0", "give_up_serving=false"])
    assert params == AllocatorParams(restart_work=10**9, restarts=0, give_up_serving=False)
    assert GAP["_params"]([]) is None


@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ("bogus=1", "max_packs"),  # an unknown field: the message lists the real ones
        ("restarts", "NAME=VALUE"),
        ("restarts=many", "integer"),
        ("give_up_serving=1", "true or false"),
        ("restarts=-1", "restarts"),  # AllocatorParams' own range check
    ],
)
def test_bad_overrides_are_named(setting, names):
    with pytest.raises(ValueError, match=names):
        GAP["_params"]([setting])


def test_a_path_draws_until_it_has_count_of_its_own():
    # day-shape seeds 20000-20013: 20000, 20010 and 20013 are of the benchmarks' size (fast
    # path), the ten between them smaller
    result = GAP["measure"](2, 20000, 30.0, day=True, path="fast")
    rows, summary = result["rows"], result["summary"]
    assert [r["scenario"] for r in rows] == ["small-20000", "small-20010"]
    assert summary["seeds"] == [20000, 20010]
    skipped = [small_case(k, day=True) for k in range(20001, 20010)]
    assert all(search_effort(s)[1] for s in skipped)
    assert all(r["path"] == "fast" for r in rows)
    # with an override the path taken is the one those parameters choose
    forced = GAP["measure"](
        1, 20000, 30.0, day=True, path="fast", params=AllocatorParams(small_work=10**6)
    )
    assert forced["rows"][0]["path"] == "small"
