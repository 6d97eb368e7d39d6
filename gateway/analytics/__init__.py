"""Access-log analytics: the Spark anomaly job, its detectors, the simulator, the reports.

See docs/analytics.md."""
