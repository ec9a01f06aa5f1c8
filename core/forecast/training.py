"""Training runs: GPU-hours and a GPU count from 22 run features, fitted with statsmodels.

The estimator is an OLS regression of log GPU-hours on the features (the variant as a
categorical, sizes and counts in logs, flags as indicators). Log-linear because the cost of a
run is a product: FLOPs per token x tokens / (peak x utilisation). Its prediction interval is
the regression's own, on the log scale, so it is as wide as the utilisation noise in the runs
it learned from. The GPU count is physics, not regression: the smallest power of two whose
memory holds the weights, gradients, optimizer states and activations (`memory_gpus`), raised
until the run finishes within a day of wall time.

The shipped history `data/training/runs.csv` comes from `scripts/make_training_runs.py`;
refit on your own with `fit_training_model(load_runs(path))`.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
from statsmodels.regression.linear_model import OLS

from ..formats import read_text
from ..model import ScenarioError, is_power_of_two

METHODS = ("full", "lora")
OBJECTIVES = ("sft", "dpo", "rlhf", "rlvr", "cpt")
VARIANTS = tuple(f"{m}_{o}" for m in METHODS for o in OBJECTIVES)  # full_sft ... lora_cpt
RL_OBJECTIVES = ("rlhf", "rlvr")
PRECISIONS = ("bf16", "fp16", "fp8")
GPU_TYPES = ("A100", "H100", "H200", "L40S")
INTERCONNECTS = ("infiniband", "ethernet")
ZERO_STAGES = (0, 1, 2, 3)

DATA = Path(__file__).resolve().parents[2] / "data" / "training" / "runs.csv"
TARGET_WALL_HOURS = 24.0  # the recommended count aims to finish within a day
MAX_RECOMMENDED_GPUS = 256
USABLE_MEMORY = 0.9  # of a GPU's memory, the rest is framework and fragmentation
PROMPT_TOKENS = 512  # RL: tokens per prompt, so prompts = train tokens / PROMPT_TOKENS


@dataclass(frozen=True)
class TrainingRun:
    """The 22 features of a training run (see `FEATURES` for each one's meaning)."""

    variant: str
    params_billion: float
    active_params_billion: float | None = None
    train_tokens_billion: float = 1.0
    epochs: float = 1.0
    seq_len: int = 4096
    global_batch_size: int = 128
    lora_rank: int = 0
    precision: str = "bf16"
    gpu_type: str = "H100"
    gpu_memory_gb: float = 80.0
    zero_stage: int = 3
    gradient_checkpointing: bool = True
    flash_attention: bool = True
    sequence_packing: bool = True
    interconnect: str = "infiniband"
    rollouts_per_prompt: int = 0
    generation_tokens: int = 0
    reward_model_billion: float = 0.0
    verifier_seconds: float = 0.0
    updates_per_batch: int = 1
    eval_fraction: float = 0.05

    def __post_init__(self) -> None:
        problems = _run_problems(self)
        if problems:
            raise ScenarioError(
                problems[0] if len(problems) == 1 else "; ".join(problems), problems
            )
        if self.active_params_billion is None:
            object.__setattr__(self, "active_params_billion", float(self.params_billion))

    @property
    def method(self) -> str:
        return self.variant.split("_")[0]

    @property
    def objective(self) -> str:
        return self.variant.split("_")[1]

    @classmethod
    def from_mapping(cls, row: Mapping[str, object], owner: str = "run") -> TrainingRun:
        """A run from a dict or CSV row (strings converted), naming the field that is wrong."""
        values = {}
        for f in fields(cls):
            if f.name not in row or _blank(row[f.name]):
                continue
            values[f.name] = _convert(f.name, row[f.name], owner)
        if "variant" not in values or "params_billion" not in values:
            missing = [n for n in ("variant", "params_billion") if n not in values]
            raise ScenarioError(f"{owner}: missing {', '.join(missing)}")
        try:
            return cls(**values)
        except ScenarioError as e:
            raise e.with_prefix(owner) from None


# The 22 features: name -> what it is. Kept next to the dataclass so the docs cannot drift.
FEATURES: dict[str, str] = {
    "variant": "full fine-tune or LoRA x SFT, DPO, RLHF, RLVR, CPT: one of " + ", ".join(VARIANTS),
    "params_billion": "total parameters, billions (sets memory)",
    "active_params_billion": "parameters active per token, billions (MoE; = params if dense)",
    "train_tokens_billion": "tokens per epoch, billions (DPO: chosen + rejected; RL: prompts)",
    "epochs": "passes over the data",
    "seq_len": "maximum sequence length, tokens",
    "global_batch_size": "sequences per optimizer step (caps data parallelism)",
    "lora_rank": "LoRA adapter rank (0 for full fine-tuning, > 0 for LoRA)",
    "precision": "compute precision: " + ", ".join(PRECISIONS),
    "gpu_type": "GPU model: " + ", ".join(GPU_TYPES),
    "gpu_memory_gb": "memory per GPU, GB",
    "zero_stage": "DeepSpeed ZeRO stage 0-3 (what is sharded across GPUs)",
    "gradient_checkpointing": "recompute activations in the backward pass (less memory, +FLOPs)",
    "flash_attention": "fused attention kernels (higher utilisation)",
    "sequence_packing": "several short samples packed per sequence (less padding)",
    "interconnect": "between nodes: " + ", ".join(INTERCONNECTS),
    "rollouts_per_prompt": "RL: sampled completions per prompt (0 otherwise)",
    "generation_tokens": "RL: mean generated tokens per rollout (0 otherwise)",
    "reward_model_billion": "RLHF: reward (and critic) model size, billions (0 otherwise)",
    "verifier_seconds": "RLVR: seconds to verify one rollout (tests, checkers; 0 otherwise)",
    "updates_per_batch": "RL: optimisation epochs over each rollout batch (1 otherwise)",
    "eval_fraction": "extra share of compute for evaluation and checkpoints",
}
assert len(FEATURES) == 22 and list(FEATURES) == [f.name for f in fields(TrainingRun)]

_CHOICES = {
    "variant": VARIANTS,
    "precision": PRECISIONS,
    "gpu_type": GPU_TYPES,
    "interconnect": INTERCONNECTS,
}
_INTEGERS = {
    "seq_len",
    "global_batch_size",
    "lora_rank",
    "zero_stage",
    "rollouts_per_prompt",
    "generation_tokens",
    "updates_per_batch",
}
_BOOLEANS = {"gradient_checkpointing", "flash_attention", "sequence_packing"}


def _blank(value: object) -> bool:
    return (
        value is None
        or (isinstance(value, str) and not value.strip())
        or (isinstance(value, float) and math.isnan(value))
    )


def _convert(name: str, value: object, owner: str) -> object:
    if name in _CHOICES:
        return str(value).strip()
    if name in _BOOLEANS:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        text = str(value).strip().lower()
        if text in {"true", "1", "yes"}:
            return True
        if text in {"false", "0", "no"}:
            return False
        raise ScenarioError(f"{owner}: {name} must be true or false, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ScenarioError(f"{owner}: {name} must be a number, got {value!r}") from None
    if name in _INTEGERS:
        if not math.isfinite(number) or number != int(number):
            raise ScenarioError(f"{owner}: {name} must be a whole number, got {value!r}")
        return int(number)
    return number


def _run_problems(run: TrainingRun) -> list[str]:
    problems = []
    for name, choices in _CHOICES.items():
        if getattr(run, name) not in choices:
            problems.append(f"{name} {getattr(run, name)!r} is not one of {', '.join(choices)}")
    positive = (
        "params_billion",
        "train_tokens_billion",
        "epochs",
        "seq_len",
        "global_batch_size",
        "gpu_memory_gb",
        "updates_per_batch",
    )
    for name in positive:
        value = getattr(run, name)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and value > 0)
        ):
            problems.append(f"{name} must be a number > 0, got {value!r}")
    non_negative = (
        "lora_rank",
        "rollouts_per_prompt",
        "generation_tokens",
        "reward_model_billion",
        "verifier_seconds",
        "eval_fraction",
    )
    for name in non_negative:
        value = getattr(run, name)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and value >= 0)
        ):
            problems.append(f"{name} must be a number >= 0, got {value!r}")
    if problems:
        return problems
    active = run.active_params_billion
    if active is not None and not (
        isinstance(active, int | float) and 0 < active <= run.params_billion
    ):
        problems.append(f"active_params_billion must be in (0, params_billion], got {active!r}")
    if run.zero_stage not in ZERO_STAGES:
        problems.append(f"zero_stage must be 0, 1, 2 or 3, got {run.zero_stage!r}")
    if run.eval_fraction >= 1:
        problems.append(f"eval_fraction must be below 1, got {run.eval_fraction}")
    method, objective = run.variant.split("_")
    if method == "lora" and run.lora_rank < 1:
        problems.append(f"variant {run.variant} needs lora_rank >= 1")
    if method == "full" and run.lora_rank != 0:
        problems.append(f"variant {run.variant} trains all weights: lora_rank must be 0")
    if objective in RL_OBJECTIVES and (run.rollouts_per_prompt < 1 or run.generation_tokens < 1):
        problems.append(
            f"variant {run.variant} needs rollouts_per_prompt and generation_tokens >= 1"
        )
    if objective == "rlhf" and run.reward_model_billion <= 0:
        problems.append(f"variant {run.variant} needs reward_model_billion > 0")
    return problems


# ---------------------------------------------------------------------------------------------
# Memory: the least GPUs a run fits on (physics shared with the data generator)


def memory_per_gpu_gb(run: TrainingRun, gpus: int) -> float:
    """GB one GPU holds when the run is spread over `gpus` (mixed precision with Adam)."""
    params = run.params_billion  # 1e9 params x bytes per param = GB
    if run.method == "full":
        weights, grads, optimizer = 2 * params, 2 * params, 12 * params
    else:  # frozen bf16 weights; adapter grads and states are small
        adapter = _adapter_params_billion(run)
        weights, grads, optimizer = 2 * params, 2 * adapter, 12 * adapter
    stage = run.zero_stage
    shard = {0: (1, 1, 1), 1: (1, 1, gpus), 2: (1, gpus, gpus), 3: (gpus, gpus, gpus)}[stage]
    if stage < 3 and 2 * params > USABLE_MEMORY * run.gpu_memory_gb * 0.5:
        shard = (gpus, gpus, gpus)  # too big to replicate: tensor/pipeline parallel splits it
    states = weights / shard[0] + grads / shard[1] + optimizer / shard[2]
    extra = 0.0
    if run.objective in ("dpo", "rlhf", "rlvr"):
        extra += 2 * run.params_billion / gpus  # frozen reference model
    if run.objective == "rlhf":
        extra += 2 * run.reward_model_billion / gpus + 16 * run.reward_model_billion / gpus
    hidden = _hidden_size(run.params_billion)
    layers = _layers(run.params_billion, hidden)
    per_sequence = run.seq_len * hidden * layers * (2 if run.gradient_checkpointing else 34) / 1e9
    micro_batch = max(1, min(4, run.global_batch_size // max(gpus, 1)))
    return states + extra + per_sequence * micro_batch + 2.0  # + CUDA context and buffers


def memory_gpus(run: TrainingRun, limit: int = 4096) -> int:
    """The least power-of-two GPU count whose memory holds the run."""
    gpus = 1
    while gpus <= limit:
        if memory_per_gpu_gb(run, gpus) <= USABLE_MEMORY * run.gpu_memory_gb:
            return gpus
        gpus *= 2
    raise ScenarioError(f"run does not fit on {limit} GPUs of {run.gpu_memory_gb:g} GB")


def _hidden_size(params_billion: float) -> float:
    """Model width of a typical decoder (4096 at 7B, growing with the cube root of size)."""
    return 4096.0 * (params_billion / 7.0) ** (1 / 3)


def _layers(params_billion: float, hidden: float) -> float:
    return max(1.0, params_billion * 1e9 / (12 * hidden**2))


def _adapter_params_billion(run: TrainingRun) -> float:
    """LoRA on the four attention and three MLP projections of every layer."""
    hidden = _hidden_size(run.params_billion)
    return 2 * run.lora_rank * hidden * 7 * _layers(run.params_billion, hidden) / 1e9


# ---------------------------------------------------------------------------------------------
# The regression


_NUMERIC = {  # design column -> transform of the run
    "log_active_params": lambda r: math.log(r.active_params_billion),
    "log_params": lambda r: math.log(r.params_billion),
    "log_tokens": lambda r: math.log(r.train_tokens_billion),
    "log_epochs": lambda r: math.log(r.epochs),
    "log_seq_len": lambda r: math.log(r.seq_len),
    "log_batch": lambda r: math.log(r.global_batch_size),
    "log1p_lora_rank": lambda r: math.log1p(r.lora_rank),
    "log_gpu_memory": lambda r: math.log(r.gpu_memory_gb),
    "gradient_checkpointing": lambda r: float(r.gradient_checkpointing),
    "flash_attention": lambda r: float(r.flash_attention),
    "sequence_packing": lambda r: float(r.sequence_packing),
    "log1p_rollouts": lambda r: math.log1p(r.rollouts_per_prompt),
    "log1p_generation": lambda r: math.log1p(r.generation_tokens),
    "log1p_rollout_tokens": lambda r: math.log1p(
        r.rollouts_per_prompt * r.generation_tokens / PROMPT_TOKENS
    ),
    "log1p_reward_model_ratio": lambda r: math.log1p(
        r.reward_model_billion / r.active_params_billion
    ),
    "log1p_verifier": lambda r: math.log1p(r.verifier_seconds),
    "log_updates": lambda r: math.log(r.updates_per_batch),
    "log1p_eval": lambda r: math.log1p(r.eval_fraction),
}
_CATEGORIES = {  # categorical -> levels after the first (the reference level)
    "variant": VARIANTS[1:],
    "precision": PRECISIONS[1:],
    "gpu_type": GPU_TYPES[1:],
    "interconnect": INTERCONNECTS[1:],
    "zero_stage": ZERO_STAGES[1:],
}


def design_row(run: TrainingRun) -> np.ndarray:
    """The regression's inputs for one run: constant, numeric transforms, category indicators."""
    values = [1.0] + [f(run) for f in _NUMERIC.values()]
    for name, levels in _CATEGORIES.items():
        values += [float(getattr(run, name) == level) for level in levels]
    return np.array(values)


def design_columns() -> list[str]:
    names = ["const", *_NUMERIC]
    for name, levels in _CATEGORIES.items():
        names += [f"{name}[{level}]" for level in levels]
    return names


@dataclass(frozen=True)
class TrainingEstimate:
    """GPU-hours (median, central interval) and the GPU counts to ask the scheduler for."""

    gpu_hours: float
    lower: float
    upper: float
    gpus_min: int  # the least power of two that holds the run in memory
    gpus_recommended: int  # finishes within TARGET_WALL_HOURS, where data parallelism allows
    level: float

    def job_row(
        self,
        id: str,
        priority: float,
        arrival_step: int = 0,
        max_gpus: int | None = None,
        quantile: str = "median",
    ) -> dict:
        """A scenario job (SPEC section 3): gpus_min the memory minimum, gpus_max the
        recommended count (capped at `max_gpus`, the cluster's size, when given), gpu_hours the
        median estimate (`quantile="upper"`: the interval's upper end), rounded up to 0.1."""
        hours = {"median": self.gpu_hours, "upper": self.upper}.get(quantile)
        if hours is None:
            raise ScenarioError(f"quantile must be 'median' or 'upper', got {quantile!r}")
        return batch_job_row(
            id,
            "training",
            priority,
            arrival_step,
            self.gpus_min,
            self.gpus_recommended,
            math.ceil(hours * 10) / 10,
            max_gpus,
        )


@dataclass(frozen=True)
class TrainingModel:
    """A fitted log-linear GPU-hours model (statsmodels OLS results inside)."""

    results: object
    columns: tuple[str, ...]
    runs: int

    def estimate(
        self, run: TrainingRun | Mapping[str, object], level: float = 0.9
    ) -> TrainingEstimate:
        """GPU-hours with a `level` prediction interval and the GPU counts for the run."""
        if not isinstance(run, TrainingRun):
            run = TrainingRun.from_mapping(run)
        if not 0 < level < 1:
            raise ScenarioError(f"level must be between 0 and 1, got {level}")
        prediction = self.results.get_prediction(design_row(run)[None, :])
        frame = prediction.summary_frame(alpha=1 - level)
        centre = float(np.exp(frame["mean"].iloc[0]))
        lower = float(np.exp(frame["obs_ci_lower"].iloc[0]))
        upper = float(np.exp(frame["obs_ci_upper"].iloc[0]))
        least = memory_gpus(run)
        return TrainingEstimate(
            centre, lower, upper, least, recommended_gpus(run, centre, least), level
        )

    def predict_log(self, runs: list[TrainingRun]) -> np.ndarray:
        return np.asarray(self.results.predict(np.vstack([design_row(r) for r in runs])))

    def job_row(
        self,
        run: TrainingRun | Mapping[str, object],
        id: str,
        priority: float,
        arrival_step: int = 0,
        max_gpus: int | None = None,
        quantile: str = "median",
    ) -> dict:
        """`TrainingEstimate.job_row` of this run's estimate."""
        return self.estimate(run).job_row(id, priority, arrival_step, max_gpus, quantile)


def recommended_gpus(run: TrainingRun, gpu_hours: float, least: int) -> int:
    """Double from the memory minimum until the run finishes within a day, while every extra
    data-parallel replica still gets whole sequences of the global batch."""
    replicas_cap = least * max(1, run.global_batch_size)
    gpus = least
    while (
        gpu_hours / gpus > TARGET_WALL_HOURS
        and gpus * 2 <= MAX_RECOMMENDED_GPUS
        and gpus * 2 <= replicas_cap
    ):
        gpus *= 2
    return max(gpus, least)


def batch_job_row(
    id: str,
    job_type: str,
    priority: float,
    arrival_step: int,
    gpus_min: int,
    gpus_max: int,
    gpu_hours: float,
    max_gpus: int | None,
) -> dict:
    """A batch job row with the GPU range capped to a cluster of `max_gpus` GPUs."""
    if max_gpus is not None:
        cap = 1 << (int(max_gpus).bit_length() - 1) if max_gpus >= 1 else 0
        if gpus_min > cap:
            raise ScenarioError(
                f"job '{id}': needs at least {gpus_min} GPUs, the cluster has {max_gpus}"
            )
        gpus_max = min(gpus_max, cap)
    assert is_power_of_two(gpus_min) and is_power_of_two(gpus_max)
    return {
        "id": id,
        "type": job_type,
        "priority": priority,
        "arrival_step": arrival_step,
        "gpus_min": gpus_min,
        "gpus_max": gpus_max,
        "gpu_hours": gpu_hours,
    }


def runs_from_table(
    table: pd.DataFrame, name: str = "runs.csv"
) -> tuple[list[TrainingRun], np.ndarray]:
    """Runs and their GPU-hours from a table with the 22 feature columns and `gpu_hours`."""
    missing = [c for c in ("variant", "params_billion", "gpu_hours") if c not in table.columns]
    if missing:
        raise ScenarioError(
            f"{name}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; the features are {', '.join(FEATURES)}"
        )
    runs, hours = [], []
    for i, row in enumerate(table.to_dict("records")):
        owner = f"{name}: row {i + 2}"
        runs.append(TrainingRun.from_mapping(row, owner))
        value = _convert("gpu_hours", row["gpu_hours"], owner)
        if not (math.isfinite(value) and value > 0):
            raise ScenarioError(f"{owner}: gpu_hours must be > 0, got {row['gpu_hours']!r}")
        hours.append(value)
    return runs, np.array(hours)


def load_runs(path: str | Path) -> pd.DataFrame:
    """A run-history CSV as a table (validated when fitted)."""
    text = read_text(path)
    try:
        return pd.read_csv(io.StringIO(text), skipinitialspace=True)
    except (pd.errors.ParserError, ValueError) as e:
        raise ScenarioError(f"{Path(path).name}: cannot be read as CSV ({e})") from None


def fit_training_model(runs_df: pd.DataFrame, name: str = "runs.csv") -> TrainingModel:
    """OLS of log GPU-hours on the design of `design_row`, from a run-history table."""
    runs, hours = runs_from_table(runs_df, name)
    columns = design_columns()
    if len(runs) < 2 * len(columns):
        raise ScenarioError(
            f"{name}: {len(runs)} runs are too few to fit {len(columns)} "
            f"coefficients; at least {2 * len(columns)} are needed"
        )
    x = np.vstack([design_row(r) for r in runs])
    keep = _identifiable(x)
    results = OLS(np.log(hours), x).fit() if keep.all() else _fit_subset(x, hours, keep)
    return TrainingModel(results, tuple(columns), len(runs))


def _identifiable(x: np.ndarray) -> np.ndarray:
    """Columns the data can tell apart, in order: a column that never varies or repeats others
    (e.g. active = total parameters in a history of dense models) stays out of the fit."""
    keep = np.zeros(x.shape[1], dtype=bool)
    scaled = x / np.maximum(np.abs(x).max(axis=0), 1e-12)
    rank = 0
    for j in range(x.shape[1]):
        keep[j] = True
        new_rank = np.linalg.matrix_rank(scaled[:, keep], tol=1e-8 * np.sqrt(len(x)))
        if new_rank > rank:
            rank = new_rank
        else:
            keep[j] = False
    return keep


def _fit_subset(x: np.ndarray, hours: np.ndarray, keep: np.ndarray) -> object:
    """Fit on the varying columns only; unseen levels then add nothing (coefficient 0)."""
    return _SubsetResults(OLS(np.log(hours), x[:, keep]).fit(), keep)


class _SubsetResults:
    """Results of a fit on some design columns, predicting from full design rows."""

    def __init__(self, results: object, keep: np.ndarray):
        self._results, self._keep = results, keep

    def get_prediction(self, x: np.ndarray):
        return self._results.get_prediction(x[:, self._keep])

    def predict(self, x: np.ndarray):
        return self._results.predict(x[:, self._keep])

    @property
    def rsquared(self) -> float:
        return self._results.rsquared


@functools.cache
def default_training_model() -> TrainingModel:
    """The model fitted on the shipped run history (fitted once per process)."""
    return fit_training_model(load_runs(DATA), DATA.name)


def size_only_model(runs_df: pd.DataFrame) -> object:
    """The baseline to beat: log GPU-hours on log parameter count alone."""
    runs, hours = runs_from_table(runs_df)
    x = np.column_stack([np.ones(len(runs)), [math.log(r.params_billion) for r in runs]])
    return OLS(np.log(hours), x).fit()
