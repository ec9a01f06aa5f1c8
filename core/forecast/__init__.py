"""Forecasts that feed the planner (SPEC section 5).

- `demand`: hourly real-time traffic -> robust weekly forecast (median of seasonal naive,
  MSTL+SES and Theta on a history with outages repaired), conformal interval, coverage risk and
  a GPU-count path under a job's swap cap.
- `rolling_demand`: the same forecasts as the rolling horizon needs them, per window, in GPUs,
  with the adaptive planning quantile.
- `training`: GPU-hours and a GPU count for a training run from 22 run features.
- `quantization`: GPU-hours from calibration tiers by parameter count and algorithm.
"""
