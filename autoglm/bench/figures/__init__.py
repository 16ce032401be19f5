"""Figures of the documentation, generated from the benchmark results files they quote.

``python -m autoglm.bench.figures docs/PERFORMANCE.md`` rewrites every marked region of the
document from ``docs/results/``; ``--check`` only says whether any region is out of date.
"""
