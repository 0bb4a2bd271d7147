"""Benchmarks: ``python -m bench NAME`` runs ``bench/bench_NAME.py`` (see docs/performance.md)."""
