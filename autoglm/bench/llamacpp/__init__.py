"""``autoglm bench compare-llamacpp``: the engine beside llama.cpp's ``llama-bench`` on the same weights and threads."""
