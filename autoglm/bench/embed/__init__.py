"""``autoglm bench embed``: embeddings per second of a pooling engine against transformers on the same inputs."""
