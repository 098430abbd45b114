"""Benchmarks run with ``pytest bench --benchmark-enable``; ``-p no:randomly`` is not needed."""
