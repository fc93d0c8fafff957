"""Kueue's built-in TAS vs kueue-tas on the local cluster, side by side (issue 15).

    .venv/bin/python -m benchmarks.vs_kueue [--shapes uncontended,contended] [--pairs 3] [--seed 1]

See ``__main__`` for the options and docs/benchmarks.md for figures.
"""
