"""Draws one token per row from its probabilities, each row by its own seed alone.

Each draw is fixed by one 53-bit uniform number derived from the row's seed and draw counter,
placed in the row's cumulative distribution (inverse transform sampling). That costs one pass
over the probabilities, where filling a vocabulary-wide noise tensor per row (as the Gumbel or
exponential race does) costs a random-number generator call per row: ~2 ms a row for a
152k-token vocabulary on a CPU, and one kernel launch per row on an accelerator.
"""
from __future__ import annotations

import torch

# Probabilities are summed in blocks of this many tokens (float32), and the blocks' running
# totals kept in float64, so a token's share of the row is off by float32 rounding of its own
# block's sum at most, not by that of a running total over the whole vocabulary.
_BLOCK = 1024


def draw_seed(seed: int, draw_index: int) -> int:
    """The seed of a seeded row's ``draw_index``-th draw: a 64-bit mix (SplitMix64's finaliser) of
    both, so nearby seeds and counters give unrelated streams."""
    mask = 2**64 - 1
    value = (seed + (draw_index + 1) * 0x9E3779B97F4A7C15) & mask
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & mask
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & mask
    return (value ^ (value >> 31)) & (2**63 - 1)


def draw_uniform(seed: int, draw_index: int) -> float:
    """The draw's uniform number in [0, 1): the top 53 bits of its seed, as many as a float64 holds."""
    return (draw_seed(seed, draw_index) >> 10) * 2.0**-53


def inverse_cdf_draw(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Row r takes token i with probability ``probs[r, i] / probs[r].sum()``: the token whose span
    of the row's cumulative distribution holds ``uniforms[r]`` of its total. ``probs`` [N, V] need
    not be normalised; ``uniforms`` [N] float64 in [0, 1). A token of probability 0 is never drawn.
    """
    num_rows, vocab_size = probs.shape
    block_mass = _block_sums(probs).double()
    block_ends = block_mass.cumsum(dim=-1)
    target = uniforms.to(block_ends.dtype) * block_ends[:, -1]
    block = _span_holding(block_ends, block_mass, target)
    block_start = (block_ends - block_mass).gather(1, block.unsqueeze(1)).squeeze(1)
    token_ids = block.unsqueeze(1) * _BLOCK + torch.arange(_BLOCK, device=probs.device)
    in_vocab = token_ids < vocab_size  # the last block may be partial
    block_probs = probs.gather(1, token_ids.clamp(max=vocab_size - 1)).masked_fill(~in_vocab, 0.0).double()
    token = _span_holding(block_probs.cumsum(dim=-1), block_probs, target - block_start)
    # A row without any mass (a model that gave no finite logit) still gets a token of the vocabulary.
    return (block * _BLOCK + token).clamp(max=vocab_size - 1)


def _block_sums(probs: torch.Tensor) -> torch.Tensor:
    """[N, ceil(V / block)]: each row's probability in each block of tokens, the last one partial."""
    whole = probs.shape[1] // _BLOCK * _BLOCK
    sums = probs[:, :whole].unflatten(1, (-1, _BLOCK)).sum(dim=-1)
    if whole == probs.shape[1]:
        return sums
    return torch.cat([sums, probs[:, whole:].sum(dim=-1, keepdim=True)], dim=1)


def _span_holding(ends: torch.Tensor, mass: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per row, the first entry whose running total ``ends`` passes ``target``. Rounding can leave a
    target at or past a row's last total; it then takes the row's last entry with mass, so an
    entry without mass is never chosen."""
    index = torch.searchsorted(ends, target.unsqueeze(1), right=True).squeeze(1)
    last_with_mass = mass.shape[1] - 1 - (mass > 0).flip(-1).to(torch.uint8).argmax(dim=-1)
    return torch.minimum(index, last_with_mass)
