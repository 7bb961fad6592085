"""Benchmarks: run as `python -m tests.bench.<name>`; not collected by pytest."""
