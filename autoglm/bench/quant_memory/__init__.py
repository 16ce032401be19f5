"""``autoglm bench quant-memory``: bytes the model holds in float, int8 and int4."""
