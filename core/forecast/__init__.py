"""Forecasts that feed the planner (SPEC section 5).

- `demand`: hourly real-time traffic -> a forecast that holds on series it was not tuned to
  (`ensemble`: seasonal naive, smoothed, the last day's level and the daily profile, weighted
  by their errors at the history's own earlier origins, outages repaired), a bounded conformal
  interval, coverage risk and a GPU-count path under a job's swap cap.
- `rolling_demand`: the same forecasts as the rolling horizon needs them, per window, in GPUs,
  with the adaptive planning quantile.
- `training`: GPU-hours and a GPU count for a training run from 22 run features.
- `quantization`: GPU-hours from calibration tiers by parameter count and algorithm.
"""

# The forecast quantile each service is planned at in the rolling horizon (`core.rolling`, the
# CLI's `simulate --demand-quantile`, the Horizon page): the upper end of the calibrated 90%
# interval. At the 90% quantile the allocator served less than fifo's peak reservation on
# rolling-philly, rolling-surge and a real Philly window (issue 52, scripts/rolling_real_demand.py).
DEMAND_QUANTILE = 0.95
