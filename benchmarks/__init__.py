"""Benchmarks (`make bench`): figures and ratios, never pass/fail timings in the test suite."""
