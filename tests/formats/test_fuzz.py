"""Fuzz every reader: random bytes and near-valid JSON/CSV either load or raise ScenarioError.

Each input runs in a forked child under an address-space cap (`RLIMIT_AS`), so an input that
would allocate gigabytes fails the test as a crash (MemoryError) instead of taking the machine.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import resource
import traceback
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core import formats, workload
from core.forecast.demand import load_history
from core.model import ScenarioError
from core.planners import solve
from tests.budget import examples
from tests.test_io import BASE

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

HEADROOM = 300 * 2**20  # bytes a child may allocate beyond what the interpreter already has
FUZZ = settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 2**32


def outcome(read: Callable[[], object]) -> str:
    """'loaded', 'refused' (ScenarioError) or 'crashed' plus the traceback, from a capped child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: cap memory, read, report, leave without running any cleanup
        os.close(r)
        try:
            cap = _address_space() + HEADROOM
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            try:
                read()
                text = "loaded"
            except ScenarioError:
                text = "refused"
            except BaseException:
                text = "crashed\n" + traceback.format_exc(limit=8)[-4000:]
            os.write(w, text.encode("utf-8", "backslashreplace"))
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode() or "crashed\n(the child died without a word)"


def assert_loads_or_refuses(read: Callable[[], object]) -> None:
    result = outcome(read)
    assert result in ("loaded", "refused"), result


# ---------------------------------------------------------------------------------------------
# Hostile values and near-valid documents

HOSTILE_TEXT = st.sampled_from(
    [
        "",
        " ",
        " a",
        "a ",
        "[]",
        "[ ]",
        "0 1",
        "=cmd",
        "'=cmd",
        "1e400",
        "-1e400",
        "nan",
        "inf",
        "-100000000",
        "-1000000000000000000000",
        "1" + "0" * 400,
        "2.0",
        "2.5",
        "\ud800",
        "9999-12-31T23:00",
        "0001-01-01T00:00",
        '"',
        "\r",
        ",",
        "realtime",
        "training",
    ]
)
HOSTILE_VALUES = st.one_of(
    st.integers(),
    st.integers(min_value=10**300, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2, 2.0, 2.5, 1e308, 2**63, -(2**63), True, None]),
    st.text(max_size=12),
    HOSTILE_TEXT,
    st.lists(st.one_of(st.integers(-3, 10), st.floats(), st.none()), max_size=6),
    st.dictionaries(st.sampled_from(["gpu_start", "gpus", "remaining_steps", "x"]), st.integers()),
    st.integers(1, 3000).map(lambda n: json.loads("[" * n + "]" * n) if n < 900 else []),
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for k, value in enumerate(node):
            yield from _paths(value, (*prefix, k))


BASE_PATHS = [p for p in _paths(BASE) if p]


@st.composite
def near_valid_json(draw) -> str:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(BASE_PATHS))
        node = doc
        try:
            for key in path[:-1]:
                node = node[key]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(HOSTILE_VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced a parent
    text = json.dumps(doc)
    how = draw(st.sampled_from(["as is", "as is", "truncate", "insert", "duplicate key"]))
    at = draw(st.integers(0, len(text)))
    if how == "truncate":
        text = text[:at]
    elif how == "insert":
        text = text[:at] + draw(st.sampled_from(list('{}[],:"0-e\\ '))) + text[at:]
    elif how == "duplicate key":
        text = text.replace('"gpus": ', '"gpus": 2, "gpus": ', 1)
    return text


def _base_scenario():
    return formats.scenario_from_dict(BASE)


def _mutate_csv(draw, text: str) -> str:
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["cell", "cell", "cell", "drop", "copy", "cut"]))
        k = draw(st.integers(0, len(lines) - 1)) if lines else 0
        if not lines:
            break
        if how == "cell":
            cells = lines[k].split(",")
            cells[draw(st.integers(0, len(cells) - 1))] = draw(HOSTILE_TEXT | st.text(max_size=8))
            lines[k] = ",".join(cells)
        elif how == "drop":
            del lines[k]
        elif how == "copy":
            lines.insert(k, lines[k])
        else:
            lines[k] = lines[k][: draw(st.integers(0, len(lines[k])))]
    return "\n".join(lines) + "\n"


@st.composite
def near_valid_pair(draw) -> tuple[str, str]:
    jobs_csv, demand_csv = formats.scenario_to_tables(_base_scenario())
    if draw(st.booleans()):
        jobs_csv = _mutate_csv(draw, jobs_csv)
    else:
        demand_csv = _mutate_csv(draw, demand_csv)
    return jobs_csv, demand_csv


@st.composite
def near_valid_grid(draw) -> str:
    scenario = _base_scenario()
    return _mutate_csv(draw, formats.grid_to_csv(scenario, solve(scenario, "fifo")))


@st.composite
def near_valid_history(draw) -> str:
    rows = [f"2026-08-{1 + h // 24:02d}T{h % 24:02d}:00,{(h * 7) % 13}" for h in range(60)]
    return _mutate_csv(draw, "timestamp,requests\n" + "\n".join(rows) + "\n")


# ---------------------------------------------------------------------------------------------
# Every reader


@FUZZ
@given(st.binary(max_size=3000), st.sampled_from(["x.json", "jobs.csv", "x.txt", "history.csv"]))
def test_random_bytes_through_read_and_uploads(data, name):
    base = _base_scenario()

    def through_every_bytes_reader():
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"fuzz-{os.getpid()}-{name}"
        path.write_bytes(data)
        try:
            for attempt in (
                lambda: formats.read(path),
                lambda: formats.read([path, path], base=base),
                lambda: workload.scenario_from_uploads([(name, data)], base),
                lambda: load_history(data, name=name),
            ):
                with contextlib.suppress(ScenarioError):
                    attempt()
        finally:
            path.unlink()

    assert_loads_or_refuses(through_every_bytes_reader)


@FUZZ
@given(near_valid_json())
@example('{"jobs": ' + "[" * 20_000 + "]" * 20_000 + "}")
@example('{"cluster": {"gpus": 1' + "0" * 5000 + "}}")
def test_near_valid_json(text):
    assert_loads_or_refuses(lambda: formats.scenario_from_json(text, "fuzz.json"))


@FUZZ
@given(near_valid_pair())
@example(
    (
        formats.scenario_to_tables(formats.scenario_from_dict(BASE))[0],
        "step,job_id,demand\n-1000000000,chat,1\n0,chat,1\n1,chat,1\n2,chat,1\n3,chat,1\n",
    )
)
def test_near_valid_csv_pair(pair):
    jobs_csv, demand_csv = pair
    sources = [("demand.csv", demand_csv), ("jobs.csv", jobs_csv)]
    assert_loads_or_refuses(lambda: formats.read_sources(sources, base=_base_scenario()))


@FUZZ
@given(near_valid_grid())
def test_near_valid_grid(text):
    scenario = _base_scenario()
    assert_loads_or_refuses(lambda: formats.plan_from_grid_csv(scenario, text))


_FAR_STAMP = "timestamp,requests\n9999-12-31T23:00,0\n2026-08-01T01:00,7\n2026-08-01T02:00,1\n"


@pytest.mark.slow
@FUZZ
@given(near_valid_history())
@example(_FAR_STAMP)
def test_near_valid_history(text):
    data = text.encode("utf-8", "surrogatepass")  # lone surrogates become bytes that are not UTF-8
    assert_loads_or_refuses(lambda: load_history(data, name="history.csv"))
    assert_loads_or_refuses(lambda: load_history(text, name="history.csv"))


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.sampled_from(workload.JOB_TABLE_COLUMNS),
            HOSTILE_VALUES.filter(lambda v: not isinstance(v, list | dict)),
        ),
        min_size=1,
        max_size=5,
    )
)
@example([(0, "id", "\ud800")])  # an id holding a lone surrogate: its issue line, not a crash
def test_random_editor_cells(changes):
    base = _base_scenario()
    jobs, demand = workload.editor_tables(base)
    jobs = jobs.astype(object)
    for row, column, value in changes:
        jobs.iloc[row, jobs.columns.get_loc(column)] = pd.NA if value is None else value

    def edit():
        result = workload.scenario_from_editor(base, jobs, demand)
        workload.issues_table(jobs, result)
        workload.ignored_lines(jobs, result)

    assert_loads_or_refuses(edit)
