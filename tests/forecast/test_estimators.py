"""Training and quantization estimators: variants, LoRA vs full, held-out error, job rows."""

from __future__ import annotations

import runpy
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from core.forecast.quantization import ALGORITHMS, estimate_quantization, load_tiers
from core.forecast.training import (
    FEATURES,
    OBJECTIVES,
    VARIANTS,
    TrainingRun,
    default_training_model,
    fit_training_model,
    load_runs,
    memory_gpus,
    runs_from_table,
    size_only_model,
)
from core.model import BatchJob, ScenarioError
from tests.paths import DATA_DIR, ROOT

RUNS = DATA_DIR / "training" / "runs.csv"


def example_run(variant: str, params: float = 8.0, **changes) -> TrainingRun:
    """A plausible run of each variant, the same workload wherever variants allow it."""
    objective = variant.split("_")[1]
    fields = dict(
        variant=variant,
        params_billion=params,
        train_tokens_billion=0.5,
        lora_rank=16 if variant.startswith("lora") else 0,
    )
    if objective == "cpt":
        fields.update(train_tokens_billion=10.0, seq_len=16384)
    if objective in ("rlhf", "rlvr"):
        fields.update(
            train_tokens_billion=0.01,
            rollouts_per_prompt=8,
            generation_tokens=512,
            updates_per_batch=2,
        )
    if objective == "rlhf":
        fields["reward_model_billion"] = 7.0
    if objective == "rlvr":
        fields["verifier_seconds"] = 1.0
    fields.update(changes)
    return TrainingRun(**fields)


@pytest.fixture(scope="module")
def model():
    return default_training_model()


def test_there_are_22_documented_features_and_10_variants():
    assert len(FEATURES) == 22 and len(VARIANTS) == 10
    assert set(VARIANTS) == {f"{m}_{o}" for m in ("full", "lora") for o in OBJECTIVES}
    documented = (DATA_DIR / "training" / "README.md").read_text()
    for name in FEATURES:
        assert f"`{name}`" in documented, name
    assert list(pd.read_csv(RUNS, nrows=1).columns) == [*FEATURES, "gpus", "gpu_hours"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_is_accepted_and_gives_a_usable_job(model, variant):
    estimate = model.estimate(example_run(variant))
    assert 0 < estimate.lower < estimate.gpu_hours < estimate.upper
    assert estimate.gpus_min <= estimate.gpus_recommended
    row = estimate.job_row(f"train-{variant}", priority=4, arrival_step=2)
    job = BatchJob(**row)  # the scenario model accepts it as it is
    assert job.type == "training" and job.arrival_step == 2
    assert job.gpus_min == estimate.gpus_min and job.gpu_hours >= estimate.gpu_hours


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("params", [1.0, 8.0, 70.0])
@pytest.mark.parametrize("rank", [8, 128])
def test_lora_is_cheaper_than_full_for_the_same_run(model, objective, params, rank):
    full = model.estimate(example_run(f"full_{objective}", params))
    lora = model.estimate(example_run(f"lora_{objective}", params, lora_rank=rank))
    assert lora.gpu_hours < full.gpu_hours
    assert lora.gpus_min <= full.gpus_min  # no optimizer states for frozen weights


def test_more_tokens_and_bigger_models_cost_more(model):
    base = example_run("full_sft")
    assert (
        model.estimate(replace(base, train_tokens_billion=2.0)).gpu_hours
        > model.estimate(base).gpu_hours
    )
    assert model.estimate(example_run("full_sft", 70.0)).gpu_hours > model.estimate(base).gpu_hours


def test_beats_a_model_size_only_estimator_on_held_out_runs():
    table = load_runs(RUNS)
    train, held_out = table.iloc[:900], table.iloc[900:]
    full = fit_training_model(train)
    size_only = size_only_model(train)
    runs, hours = runs_from_table(held_out)
    full_log = full.predict_log(runs)
    size_log = size_only.predict(
        np.column_stack([np.ones(len(runs)), np.log([r.params_billion for r in runs])])
    )
    full_error = np.median(np.abs(full_log - np.log(hours)))
    size_error = np.median(np.abs(size_log - np.log(hours)))
    full_mae = np.mean(np.abs(np.exp(full_log) - hours))
    size_mae = np.mean(np.abs(np.exp(size_log) - hours))
    print(
        f"held-out median |log error|: 22 features {full_error:.3f}, size only "
        f"{size_error:.3f}; MAE GPU-hours {full_mae:.1f} vs {size_mae:.1f}"
    )
    assert full_error < 0.5 * size_error
    assert full_mae < size_mae
    inside = [
        full.estimate(r).lower <= h <= full.estimate(r).upper
        for r, h in zip(runs[:100], hours[:100], strict=True)
    ]
    assert 0.8 <= np.mean(inside) <= 0.99  # the 90% interval is about right


def test_shipped_runs_are_what_the_generator_writes():
    generator = runpy.run_path(str(ROOT / "scripts" / "make_training_runs.py"))
    made = generator["make_runs"](count=50)
    shipped = pd.read_csv(RUNS, nrows=50)
    assert np.allclose(made["gpu_hours"].to_numpy(), shipped["gpu_hours"].to_numpy())
    assert (made["variant"].to_numpy() == shipped["variant"].to_numpy()).all()


def test_memory_minimum_grows_with_size_and_shrinks_with_memory():
    small = memory_gpus(example_run("full_sft", 7.0))
    large = memory_gpus(example_run("full_sft", 70.0))
    assert large > small
    roomy = memory_gpus(example_run("full_sft", 70.0, gpu_type="H200", gpu_memory_gb=141.0))
    assert roomy <= large


def test_job_row_respects_the_cluster_size(model):
    estimate = model.estimate(example_run("full_cpt", 8.0, train_tokens_billion=40.0))
    assert estimate.gpus_recommended > 8
    row = estimate.job_row("cpt", 1, max_gpus=12)
    assert row["gpus_max"] == 8 and BatchJob(**row).gpus_max == 8
    with pytest.raises(ScenarioError, match="needs at least"):
        model.estimate(example_run("full_sft", 70.0)).job_row("big", 1, max_gpus=1)


BAD_RUNS = [
    # (changes to a valid run, words in the message)
    ({"variant": "qlora_sft"}, ["variant 'qlora_sft'"]),
    ({"variant": "lora_sft", "lora_rank": 0}, ["lora_rank >= 1"]),
    ({"variant": "full_sft", "lora_rank": 8}, ["lora_rank must be 0"]),
    ({"variant": "full_rlhf"}, ["rollouts_per_prompt"]),  # RL without rollouts
    ({"params_billion": -1.0}, ["params_billion"]),
    ({"active_params_billion": 20.0, "params_billion": 8.0}, ["active_params_billion"]),
    ({"gpu_type": "TPU"}, ["gpu_type"]),
    ({"zero_stage": 5}, ["zero_stage"]),
]


@pytest.mark.parametrize(("changes", "words"), BAD_RUNS)
def test_bad_runs_are_rejected_by_name(changes, words):
    fields = {"variant": "full_sft", "params_billion": 8.0, **changes}
    with pytest.raises(ScenarioError) as caught:
        TrainingRun(**fields)
    for word in words:
        assert word in str(caught.value)


def test_refit_on_a_user_csv_names_bad_rows(tmp_path):
    table = load_runs(RUNS).iloc[:80].copy()
    lines = table.to_csv(index=False).splitlines()
    cells = lines[6].split(",")
    cells[list(table.columns).index("epochs")] = "many"
    lines[6] = ",".join(cells)  # data row 6 is line 7 of the file
    path = tmp_path / "mine.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ScenarioError, match=r"mine.csv: row 7: epochs must be a number"):
        fit_training_model(load_runs(path), "mine.csv")
    with pytest.raises(ScenarioError, match="missing column gpu_hours"):
        fit_training_model(table.drop(columns=["gpu_hours"]))
    # a history with fewer columns (the rest at their defaults) and no RL runs still fits;
    # what it never saw adds nothing
    runs = load_runs(RUNS).iloc[:300]
    sft_like = runs[~runs["variant"].str.contains("rl")]
    refit = fit_training_model(
        sft_like[["variant", "params_billion", "train_tokens_billion", "lora_rank", "gpu_hours"]]
    )
    small, large = (refit.estimate(example_run("full_sft", p)).gpu_hours for p in (1.0, 70.0))
    assert 0 < small < large


# ---------------------------------------------------------------------------------------------
# Quantization

SIZES = [0.5, 1, 3, 3.5, 7, 8, 13, 14, 20, 34, 40, 70, 72, 120, 180, 250, 405, 500, 1000]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_quantization_is_whole_hours_and_grows_with_parameters(algorithm):
    estimates = [estimate_quantization(p, algorithm) for p in SIZES]
    hours = [e.gpu_hours for e in estimates]
    assert all(isinstance(h, int) and h >= 1 for h in hours)
    assert hours == sorted(hours) and hours[-1] > hours[0]
    assert all(e.gpu_hours >= e.base_gpu_hours * 1.25 - 1e-9 for e in estimates)  # margin kept
    assert [e.extrapolated for e in estimates] == [p > 405 for p in SIZES]
    gpus = [e.gpus for e in estimates]
    assert gpus == sorted(gpus)
    row = estimates[5].job_row("quant-8b", priority=2)
    job = BatchJob(**row)
    assert job.type == "quantization" and job.gpus_min == job.gpus_max == estimates[5].gpus
    assert job.gpu_hours == hours[5]


def test_quantization_margin_and_algorithm_order():
    assert estimate_quantization(7, "awq", margin=0.0).gpu_hours == 1
    assert estimate_quantization(7, "awq", margin=0.5).gpu_hours == 2  # 1.5 rounds up
    for size in (7, 70):
        costs = [estimate_quantization(size, a).gpu_hours for a in ("bitsandbytes", "awq", "gptq")]
        assert costs == sorted(costs)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((7, "exl2"), "algorithm 'exl2'"),
        ((0, "awq"), "params_billion"),
        ((float("nan"), "gptq"), "params_billion"),
        ((7, "awq", -0.1), "margin"),
    ],
)
def test_quantization_bad_arguments(args, words):
    with pytest.raises(ScenarioError, match=words):
        estimate_quantization(*args)


def test_tier_table_is_checked(tmp_path):
    assert len(load_tiers()) == 21
    bad = tmp_path / "tiers.csv"
    bad.write_text("algorithm,params_max_billion,gpu_hours,gpus\nawq,7,1,3\n")
    with pytest.raises(ScenarioError, match="row 2: gpus 3 is not a power of two"):
        load_tiers(bad)
