"""A grammar's token bitmask applied to a step's logits: only the rows that carry a constraint are touched."""
from __future__ import annotations

import torch

from autoglm.step_plan import ALL_TOKENS_ALLOWED

# xgrammar's own kernels where it has them (C++ on the CPU, Triton on CUDA); elsewhere its plain-torch one,
# which needs no compiler.
_KERNEL_DEVICES = ("cpu", "cuda")


def constrained_rows(bitmask: torch.Tensor) -> list[int]:
    """Rows whose mask forbids some token: the only ones worth a pass over the vocabulary. Read from the
    host copy of the mask, before it goes to the device, as reading them there would wait for the device."""
    return (bitmask != ALL_TOKENS_ALLOWED).any(dim=1).nonzero().flatten().tolist()


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """A copy of float32 ``logits`` [N, V] with each token a row's ``bitmask`` [N, ceil(V / 32)] (on the
    logits' device) forbids at -inf, in ``rows`` only (see :func:`constrained_rows`). xgrammar's kernel
    reads the bits in place and visits those rows alone; unpacking the mask to [N, V] booleans for every
    row in torch timed several times slower on a 152k vocabulary."""
    masked = logits.clone()  # the caller keeps the raw logits for log-probs
    if rows:
        import xgrammar

        backend = "auto" if logits.device.type in _KERNEL_DEVICES else "torch_native"
        xgrammar.apply_token_bitmask_inplace(masked, bitmask, vocab_size=logits.shape[1], indices=rows,
                                             backend=backend)
    return masked
