"""``autoglm bench quant-kernels``: int8/int4 weight matmul candidates per row count."""
