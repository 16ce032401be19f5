"""Compiled kernels for paths PyTorch does not cover well; each has a plain-PyTorch fallback."""
