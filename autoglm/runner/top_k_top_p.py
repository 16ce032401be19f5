"""Top-k and top-p (nucleus) filtering of a batch of logits, each row under its own settings.

Both filters keep every token at or above a per-row logit threshold, so tokens tied at the
boundary are all kept or all dropped and a row's result does not depend on how a sort orders
ties. On a CPU a full sort of a 152k-token vocabulary costs ~5 ms a row, so the threshold is
first looked for among each row's largest logits (``topk``: its k + 1 largest where every row
has a top-k, else 1,024), and only rows whose nucleus reaches past them are searched wider, the
sort being the last resort. Each widening reads back whether every row was settled, a host
synchronisation that would stall an accelerator's queued work, so there the whole vocabulary is
sorted at once.
"""
from __future__ import annotations

import torch

# How many of a row's largest logits the CPU looks at before looking at more.
_CPU_CANDIDATE_WIDTHS = (1024, 8192)


def apply_top_k_top_p(logits: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None,
                      max_top_k: int) -> torch.Tensor:
    """Masks tokens below each row's k-th largest logit, then outside the smallest set of most
    likely tokens whose probability (renormalised after top-k) reaches top_p. ``top_k`` [N] holds
    the vocabulary size and ``top_p`` [N] 1 for rows without that filter; ``max_top_k`` is the
    largest k below the vocabulary size (0 when there is none)."""
    if top_k is None and top_p is None:
        return logits
    vocab_size = logits.shape[1]
    widths = {vocab_size}
    if logits.device.type == "cpu" and _CPU_CANDIDATE_WIDTHS:
        # Where every row's nucleus lies within its top k, its k largest logits are enough to start.
        # One more than the largest k, so that a row can see its k-th largest logit is its last kept.
        start = max_top_k + 1 if _top_k_bounds_every_row(top_k, top_p, max_top_k, vocab_size) else max(
            max_top_k + 1, _CPU_CANDIDATE_WIDTHS[0])
        widths |= {min(width, vocab_size) for width in (start, *_CPU_CANDIDATE_WIDTHS) if width >= start}
    first, *wider = sorted(widths)
    thresholds, settled = _thresholds(logits, top_k, top_p, first)
    unsettled_rows = (~settled).nonzero().squeeze(1) if wider else None
    for width in wider:
        if unsettled_rows.numel() == 0:
            break
        found, settled = _thresholds(logits[unsettled_rows], None if top_k is None else top_k[unsettled_rows],
                                     None if top_p is None else top_p[unsettled_rows], width)
        thresholds[unsettled_rows] = found
        unsettled_rows = unsettled_rows[~settled]
    return logits.masked_fill(logits < thresholds.unsqueeze(1), float("-inf"))


def _top_k_bounds_every_row(top_k: torch.Tensor | None, top_p: torch.Tensor | None, max_top_k: int,
                            vocab_size: int) -> bool:
    """Whether every row that filters at all has a top-k (a row with top-p alone may need more)."""
    if top_k is None or max_top_k == 0:
        return False
    return top_p is None or not bool(((top_p < 1) & (top_k >= vocab_size)).any())


def _log_mass_left_by_top_k(logits: torch.Tensor, top_k: torch.Tensor | None, threshold: torch.Tensor,
                            largest: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """The log of each row's total after top-k, from its kept candidates where they hold all it
    keeps (its smallest candidate already dropped), else from its whole row (no top-k, or ties at
    the k-th logit reaching past the candidates): one pass over the vocabulary saved per row."""
    if largest.shape[1] == logits.shape[1]:
        return kept.logsumexp(dim=-1)
    candidates_hold_all = largest[:, -1] < threshold
    from_candidates = kept.logsumexp(dim=-1)
    if bool(candidates_hold_all.all()):  # reached on the CPU only, where a read-back costs nothing
        return from_candidates
    row_left = logits if top_k is None else logits.masked_fill(logits < threshold.unsqueeze(1), float("-inf"))
    return torch.where(candidates_hold_all, from_candidates, row_left.logsumexp(dim=-1))


def _thresholds(logits: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None,
                width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's smallest kept logit, found among its ``width`` largest, and whether those were
    enough to find it (a row whose nucleus takes all of them may reach further)."""
    num_rows, vocab_size = logits.shape
    if width == vocab_size:
        largest = logits.sort(dim=-1, descending=True).values
    else:
        largest = logits.topk(width, dim=-1).values
    no_threshold = torch.full((num_rows,), float("-inf"), device=logits.device)
    threshold = no_threshold
    if top_k is not None:  # rows without top-k hold the vocabulary size, past `width` only then
        kth_largest = largest.gather(1, (top_k.clamp(max=width) - 1).unsqueeze(1)).squeeze(1)
        threshold = torch.where(top_k < vocab_size, kth_largest, no_threshold)
    settled = torch.ones(num_rows, dtype=torch.bool, device=logits.device)
    if top_p is None:
        return threshold, settled
    kept = largest.masked_fill(largest < threshold.unsqueeze(1), float("-inf"))
    log_total = _log_mass_left_by_top_k(logits, top_k, threshold, largest, kept)
    probs = (kept - log_total.unsqueeze(1)).exp()
    mass_before = probs.cumsum(dim=-1) - probs
    # Rows at top_p = 1 keep everything, even where rounding lifts the running sum to 1.
    filtered = (top_p < 1).unsqueeze(1)
    # A nucleus holds at least the likeliest token, even where top_p rounds to 0 in float32.
    num_kept = (~((mass_before >= top_p.unsqueeze(1)) & filtered)).sum(dim=-1).clamp(min=1)
    last_kept = largest.gather(1, (num_kept - 1).unsqueeze(1)).squeeze(1)
    nucleus_ends_inside = num_kept < width
    threshold = torch.where(nucleus_ends_inside, torch.maximum(threshold, last_kept), threshold)
    return threshold, nucleus_ends_inside | ~filtered.squeeze(1) | (width == vocab_size)
