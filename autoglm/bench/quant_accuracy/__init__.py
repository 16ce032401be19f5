"""``autoglm bench quant-accuracy``: perplexity, top-1 agreement and KL of int8/int4 weights."""
