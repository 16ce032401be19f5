"""``autoglm bench images``: a phone screenshot's time to first token against transformers, the vision
encoder's throughput one image a call and batched, and what a prefix-cache hit on the same screenshot saves."""
