"""Attention over a paged KV cache, below the runner so that model code can use it.

A runner picks an :class:`AttentionBackend` for its device (:func:`select_attention_backend`),
builds :class:`AttentionMetadata` from each step's plan with it, and binds a
:class:`ForwardContext` to its model's :class:`Attention` layers; each layer then writes the
step's new K/V into its cache slots and attends over each row's cached context.
"""
from autoglm.attention.backend import AttentionBackend
from autoglm.attention.forward_context import ForwardContext
from autoglm.attention.layer import Attention
from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.selector import select_attention_backend

__all__ = ["Attention", "AttentionBackend", "AttentionMetadata", "ForwardContext", "select_attention_backend"]
