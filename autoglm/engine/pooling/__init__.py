"""Pooling: prompts read whole through the same scheduler as generation, each turned into one vector (an
embedding, a classifier's logits, a pair's relevance score) instead of continued."""
