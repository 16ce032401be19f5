"""Benchmark results: their files, the quantities read from them, and how they are formatted."""
