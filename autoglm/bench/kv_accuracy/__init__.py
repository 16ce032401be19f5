"""``autoglm bench kv-accuracy``: what each kv_cache_dtype costs in accuracy on held-out text."""
