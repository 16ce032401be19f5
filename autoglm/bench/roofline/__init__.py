"""``autoglm bench roofline``: memory bandwidth and matmul speed, and a model's speed bounds."""
