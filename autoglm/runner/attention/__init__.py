"""Attention over a paged KV cache, behind one small interface.

The model runner sets an :class:`AttentionMetadata` for each forward pass; every
:class:`Attention` layer reads it, writes the step's new K/V into its cache slots and
attends over each sequence's cached context. Backends differ only in how they do that.
"""
from autoglm.runner.attention.metadata import AttentionMetadata, attention_metadata, get_attention_metadata
from autoglm.runner.attention.layer import Attention

__all__ = ["Attention", "AttentionMetadata", "attention_metadata", "get_attention_metadata"]
