"""Benchmarks and experiments (run from the repository root); importable for their tests."""
