"""The request lifecycle: queueing, KV blocks, scheduling and the engine step."""
