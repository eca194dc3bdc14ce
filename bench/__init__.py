"""Benchmarks: every mode against the hand-written designs of the seeds, in the same run, as ratios (`make bench`)."""
