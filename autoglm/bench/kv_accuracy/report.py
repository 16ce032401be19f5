"""The table of a ``bench kv-accuracy`` results document, as the command prints it and the documents quote it."""
from __future__ import annotations

import math
from typing import Any

FLOAT_WEIGHTS = "none"  # the quantization setting of the reference run
SUMMARY_HEADER = ["weights", "kv_cache_dtype", "KV bytes per token", "nats/char", "perplexity vs auto",
                  "top-1 agreement", "mean KL vs auto (nats)"]


def weights_name(result: dict[str, Any]) -> str:
    """``int8``/``int4``, or the compute dtype of float weights (files from before quantized runs hold only those)."""
    quantization = result.get("quantization", FLOAT_WEIGHTS)
    return result["compute_dtype"] if quantization == FLOAT_WEIGHTS else quantization


def summary_rows(document: dict[str, Any]) -> list[list[str]]:
    """One row per run, against the float weights with the ``auto`` cache (``auto``); the perplexity change
    is per token, from the raw losses."""
    results = document["kv_cache_dtypes"]
    auto = results["auto"]
    return [[weights_name(result), result["kv_cache_dtype"],
             f"{result['kv_cache_bytes_per_token']:,.0f}", f"{result['loss_per_character']:.4f}",
             f"{math.exp(result['loss_per_token'] - auto['loss_per_token']) - 1:+.2%}",
             f"{result['top1_agreement']:.1%}", f"{result['mean_kl_divergence']:.5f}"]
            for result in results.values()]
