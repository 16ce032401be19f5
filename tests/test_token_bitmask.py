"""Applying a grammar's token bitmask: constrained rows only, the caller's logits untouched."""
from __future__ import annotations

import torch

from autoglm.runner.sampler import SamplingBatch
from autoglm.runner.token_bitmask import apply_token_bitmask, constrained_rows
from autoglm.step_plan import ALL_TOKENS_ALLOWED, RowSampling
from tests.optional_packages import needs_xgrammar


def test_only_rows_that_forbid_a_token_are_constrained():
    bitmask = torch.full((4, 3), ALL_TOKENS_ALLOWED, dtype=torch.int32)
    bitmask[1, 2] = 0
    bitmask[3, 0] = 2**31 - 1  # every bit but the sign bit: token 31 alone forbidden
    assert constrained_rows(bitmask) == [1, 3]


@needs_xgrammar
def test_forbidden_tokens_go_to_minus_infinity_in_a_copy():
    vocab = 70
    logits = torch.randn(3, vocab)
    raw = logits.clone()
    bitmask = torch.full((3, 3), ALL_TOKENS_ALLOWED, dtype=torch.int32)
    bitmask[0] = 0
    bitmask[0, 2] = 1 << 5  # token 69 alone, in the partial last word
    masked = apply_token_bitmask(logits, bitmask, constrained_rows(bitmask))
    assert torch.equal(logits, raw), "the raw logits stay as they were, for log-probs"
    assert masked[0].isinf().sum() == vocab - 1 and masked[0, 69] == raw[0, 69]
    assert torch.equal(masked[1:], raw[1:])


@needs_xgrammar
def test_a_mask_that_allows_everything_changes_nothing():
    logits = torch.randn(2, 40)
    bitmask = torch.full((2, 2), ALL_TOKENS_ALLOWED, dtype=torch.int32)
    assert torch.equal(apply_token_bitmask(logits, bitmask, constrained_rows(bitmask)), logits)


@needs_xgrammar
def test_only_the_rows_named_are_masked():
    """The caller names the constrained rows, read from the host copy of the mask (no wait on the device)."""
    logits = torch.randn(2, 40)
    bitmask = torch.zeros((2, 2), dtype=torch.int32)
    masked = apply_token_bitmask(logits, bitmask, [1])
    assert torch.equal(masked[0], logits[0]) and masked[1].isinf().all()


def test_the_sampling_batch_reads_the_constrained_rows_on_the_host():
    bitmask = torch.full((3, 1), ALL_TOKENS_ALLOWED, dtype=torch.int32)
    bitmask[2, 0] = 1
    batch = SamplingBatch.build([RowSampling(greedy=True)] * 3, 20, torch.device("cpu"), bitmask)
    assert batch.grammar_rows == [2]
