"""Write the training-run history the GPU-hours estimator learns from: data/training/runs.csv.

Each run draws its 22 features (core.forecast.training.FEATURES) at random within ranges a
fine-tuning team sees, then gets the GPU-hours it would take from first principles:

- training FLOPs per token: 6 x active params for full training (forward 2, backward 4), 4 x
  for LoRA (no weight gradients) plus 6 x the adapter, + 2 x with gradient checkpointing
  (a second forward), x (1 + seq_len / (6 x width)) for attention;
- DPO: a frozen reference model's forward (2 x params per token) on chosen and rejected;
- RLHF (PPO) and RLVR (GRPO-like): prompts = tokens / 512; each prompt is sampled
  rollouts_per_prompt times, generation_tokens each, at a quarter of training utilisation
  (decoding is memory-bound); the policy trains updates_per_batch times on prompt + rollout
  tokens; a reference forward for the KL term; RLHF adds the reward model's forward and a
  critic of the same size trained alongside; RLVR adds verifier time (half of it hidden behind
  generation, 32 verifiers per GPU);
- CPT is SFT's arithmetic on long, packed sequences of a larger corpus;
- time = FLOPs / (peak x utilisation): peak by GPU type and precision (fp8 x1.6 where the GPU
  has it), utilisation 0.42 x penalties (no flash attention 0.75, no packing 0.8 for SFT and
  DPO, ZeRO stage 3 0.85, stage 2 0.95, ethernet across nodes 0.8, a GPU more than 85% full
  0.9), times the eval share, times lognormal utilisation noise (sigma 0.25).

The GPU count of each run is the memory minimum of `core.forecast.training.memory_gpus`
doubled 0-3 times. The seed is fixed: rerunning writes the same file.

    .venv/bin/python scripts/make_training_runs.py
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.forecast.training import (  # noqa: E402
    FEATURES,
    PROMPT_TOKENS,
    VARIANTS,
    TrainingRun,
    _adapter_params_billion,
    _hidden_size,
    memory_gpus,
    memory_per_gpu_gb,
)
from core.model import ScenarioError  # noqa: E402

SEED = 20261129
RUNS = 1200
OUT = ROOT / "data" / "training" / "runs.csv"
PEAK_TFLOPS = {"A100": 312.0, "H100": 989.0, "H200": 989.0, "L40S": 362.0}
MEMORY_GB = {"A100": (40.0, 80.0), "H100": (80.0,), "H200": (141.0,), "L40S": (48.0,)}
FP8 = {"H100", "H200", "L40S"}
BASE_UTILISATION = 0.42
GENERATION_UTILISATION = 0.25  # of training utilisation
VERIFIERS_PER_GPU = 32
NOISE_SIGMA = 0.25
SIZES = (0.5, 1.0, 1.5, 3.0, 7.0, 8.0, 13.0, 14.0, 32.0, 34.0, 70.0)


def draw_run(rng: np.random.Generator) -> TrainingRun:
    variant = str(rng.choice(VARIANTS))
    method, objective = variant.split("_")
    params = float(rng.choice(SIZES))
    moe = rng.random() < 0.15 and params >= 7
    active = params * float(rng.choice([0.15, 0.25])) if moe else params
    gpu_type = str(rng.choice(list(PEAK_TFLOPS)))
    rl = objective in ("rlhf", "rlvr")
    tokens = {
        "sft": (0.01, 2.0),
        "dpo": (0.01, 1.0),
        "rlhf": (0.001, 0.05),
        "rlvr": (0.001, 0.05),
        "cpt": (1.0, 50.0),
    }[objective]
    return TrainingRun(
        variant=variant,
        params_billion=params,
        active_params_billion=round(active, 3),
        train_tokens_billion=round(float(np.exp(rng.uniform(*np.log(tokens)))), 4),
        epochs=float(rng.choice([1, 1, 2, 3])) if objective != "cpt" else 1.0,
        seq_len=int(
            rng.choice([8192, 16384, 32768] if objective == "cpt" else [1024, 2048, 4096, 8192])
        ),
        global_batch_size=int(rng.choice([32, 64, 128, 256, 512, 1024])),
        lora_rank=int(rng.choice([8, 16, 32, 64, 128])) if method == "lora" else 0,
        precision=str(rng.choice(["bf16", "bf16", "fp16", "fp8"])),
        gpu_type=gpu_type,
        gpu_memory_gb=float(rng.choice(MEMORY_GB[gpu_type])),
        zero_stage=int(rng.choice([0, 1, 2, 3, 3])),
        gradient_checkpointing=bool(rng.random() < 0.6),
        flash_attention=bool(rng.random() < 0.8),
        sequence_packing=bool(rng.random() < 0.5) or objective == "cpt",
        interconnect=str(rng.choice(["infiniband", "infiniband", "ethernet"])),
        rollouts_per_prompt=int(rng.choice([2, 4, 8, 16])) if rl else 0,
        generation_tokens=int(rng.choice([256, 512, 1024, 2048])) if rl else 0,
        reward_model_billion=float(rng.choice([1.0, 7.0, params])) if objective == "rlhf" else 0.0,
        verifier_seconds=round(float(rng.uniform(0.1, 5.0)), 2) if objective == "rlvr" else 0.0,
        updates_per_batch=int(rng.choice([1, 2, 4])) if rl else 1,
        eval_fraction=round(float(rng.uniform(0.0, 0.15)), 3),
    )


def train_flops_per_token(run: TrainingRun) -> float:
    active = run.active_params_billion * 1e9
    if run.method == "full":
        per_token = 6 * active
    else:
        per_token = 4 * active + 6 * _adapter_params_billion(run) * 1e9
    if run.gradient_checkpointing:
        per_token += 2 * active
    return per_token * (1 + run.seq_len / (6 * _hidden_size(run.params_billion)))


def utilisation(run: TrainingRun, gpus: int) -> float:
    u = BASE_UTILISATION
    u *= 1.0 if run.flash_attention else 0.75
    if not run.sequence_packing and run.objective in ("sft", "dpo"):
        u *= 0.8
    u *= {0: 1.0, 1: 1.0, 2: 0.95, 3: 0.85}[run.zero_stage]
    if run.interconnect == "ethernet" and gpus > 8:
        u *= 0.8
    if memory_per_gpu_gb(run, gpus) > 0.85 * run.gpu_memory_gb:
        u *= 0.9
    return u


def gpu_hours(run: TrainingRun, gpus: int, noise: float) -> float:
    """First-principles GPU-hours of a run on `gpus` GPUs, times utilisation noise."""
    fp8 = run.precision == "fp8" and run.gpu_type in FP8
    peak = PEAK_TFLOPS[run.gpu_type] * 1e12 * (1.6 if fp8 else 1.0)
    rate = peak * utilisation(run, gpus)  # useful FLOP/s per GPU
    tokens = run.train_tokens_billion * 1e9 * run.epochs
    active = run.active_params_billion * 1e9
    seconds = 0.0
    if run.objective in ("sft", "cpt"):
        seconds = tokens * train_flops_per_token(run) / rate
    elif run.objective == "dpo":
        seconds = tokens * (train_flops_per_token(run) + 2 * active) / rate
    else:
        prompts = tokens / PROMPT_TOKENS
        samples = prompts * run.rollouts_per_prompt
        sequence_tokens = samples * (PROMPT_TOKENS + run.generation_tokens)
        generation = 2 * active * samples * run.generation_tokens
        seconds += generation / (rate * GENERATION_UTILISATION)
        seconds += sequence_tokens * train_flops_per_token(run) * run.updates_per_batch / rate
        seconds += sequence_tokens * 2 * active / rate  # reference model for the KL term
        if run.objective == "rlhf":
            reward = run.reward_model_billion * 1e9
            seconds += sequence_tokens * 2 * reward / rate  # reward model scores
            seconds += sequence_tokens * 8 * reward * run.updates_per_batch / rate  # critic
        else:  # GPUs idle while the checkers run: wall time spread over g GPUs, times g
            seconds += samples * run.verifier_seconds / VERIFIERS_PER_GPU * 0.5
    return seconds * (1 + run.eval_fraction) / 3600 * noise


def make_runs(count: int = RUNS, seed: int = SEED) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    while len(rows) < count:
        run = draw_run(rng)
        try:
            least = memory_gpus(run, limit=256)
        except ScenarioError:
            continue  # does not fit a cluster this history describes
        gpus = min(least * int(rng.choice([1, 2, 4, 8])), 256)
        hours = gpu_hours(run, gpus, float(np.exp(rng.normal(0.0, NOISE_SIGMA))))
        rows.append({**asdict(run), "gpus": gpus, "gpu_hours": round(hours, 3)})
    table = pd.DataFrame(rows)
    return table[[*FEATURES, "gpus", "gpu_hours"]]


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table = make_runs()
    table.to_csv(OUT, index=False)
    print(
        f"wrote {OUT} ({len(table)} runs, GPU-hours {table.gpu_hours.min():.2f} to "
        f"{table.gpu_hours.max():.0f})"
    )


if __name__ == "__main__":
    main()
