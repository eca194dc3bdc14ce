"""Faithful Python ports of what the seeds' hand-written Lambdas do (their logic, written here; not their text).
Each is labelled a baseline wherever it is printed."""
