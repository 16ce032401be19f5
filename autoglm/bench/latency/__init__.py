"""``autoglm bench latency``: batch-1 time to first token and decode speed against transformers."""
