"""``autoglm bench throughput``: tokens per second of the engine against transformers."""
