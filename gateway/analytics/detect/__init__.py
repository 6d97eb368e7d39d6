"""The detectors, grouped by what they look at."""
