"""``autoglm bench speculative``: acceptance and batch-1 decode speed of speculative decoding."""
