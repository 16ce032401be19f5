"""The table of a ``bench kv-accuracy`` results document, as the command prints it and the documents quote it."""
from __future__ import annotations

import math
from typing import Any

SUMMARY_HEADER = ["kv_cache_dtype", "KV bytes per token", "nats/char", "perplexity vs auto", "top-1 agreement",
                  "mean KL vs auto (nats)"]


def summary_rows(document: dict[str, Any]) -> list[list[str]]:
    """One row per kv_cache_dtype; the perplexity change is per token, from the raw losses."""
    results = document["kv_cache_dtypes"]
    auto = results["auto"]
    return [[name, f"{result['kv_cache_bytes_per_token']:,.0f}", f"{result['loss_per_character']:.4f}",
             f"{math.exp(result['loss_per_token'] - auto['loss_per_token']) - 1:+.2%}",
             f"{result['top1_agreement']:.1%}", f"{result['mean_kl_divergence']:.5f}"]
            for name, result in results.items()]
