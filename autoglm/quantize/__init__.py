"""``autoglm quantize``: write a float checkpoint as a ``compressed-tensors`` int8/int4 one, and measure what it costs."""
