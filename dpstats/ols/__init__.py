"""Non-private OLS baselines: covariance estimators, baselines, verification, the R engine."""
