"""What several benchmarks share: the HTTP client and its load, request sets, engine runs, timing, flags."""
