"""Benchmarks (`make bench`, `make bench-quick`): never tests. See bench/run.py."""
