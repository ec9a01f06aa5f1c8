"""Forecasts that feed the planner (SPEC section 5).

- `demand`: hourly real-time traffic -> weekly-profile forecast, calibrated interval, coverage
  risk and a GPU-count path under a job's swap cap.
- `training`: GPU-hours and a GPU count for a training run from 22 run features.
- `quantization`: GPU-hours from calibration tiers by parameter count and algorithm.
"""
