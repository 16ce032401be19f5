"""Turns a batch of logits into next tokens, each row under its own request's settings.

Every stage runs on the whole batch at once and is skipped when no row uses it, so an
all-greedy batch without penalties costs one argmax.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from autoglm.device_transfer import tensor_to_device, to_device
from autoglm.runner.seeded_draw import draw_uniform, inverse_cdf_draw
from autoglm.runner.token_bitmask import apply_token_bitmask, constrained_rows
from autoglm.runner.top_k_top_p import apply_top_k_top_p
from autoglm.step_plan import RowSampling

_FLOAT32_TINY = torch.finfo(torch.float32).tiny
_FLOAT32_MAX = torch.finfo(torch.float32).max


@dataclass
class SamplingBatch:
    """Per-row sampling settings as tensors, built once per step.

    A stage's tensor is None when no row needs that stage. Rows that do not use a stage hold
    its neutral value (temperature 1, top_k = vocab size, top_p 1, min_p 0, penalty 1 or 0).
    """

    num_rows: int
    vocab_size: int
    all_greedy: bool
    greedy: torch.Tensor | None  # [N] bool; None when no row is greedy
    temperature: torch.Tensor | None  # [N] float
    top_k: torch.Tensor | None  # [N] long
    max_top_k: int  # the largest top_k below the vocabulary size; 0 when no row filters by top-k
    top_p: torch.Tensor | None  # [N] float
    min_p: torch.Tensor | None  # [N] float
    repetition_penalty: torch.Tensor | None  # [N] float
    seen_token_mask: torch.Tensor | None  # [N, V] bool: in the prompt or the output so far
    frequency_penalty: torch.Tensor | None  # [N] float
    presence_penalty: torch.Tensor | None  # [N] float
    output_token_counts: torch.Tensor | None  # [N, V] float
    min_tokens_ban: tuple[torch.Tensor, torch.Tensor] | None  # (rows, token ids) to mask out
    logit_bias: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None  # (rows, token ids, biases) to add
    draw_uniforms: torch.Tensor | None  # [N] float64: each sampled row's draw (0 for greedy rows); None when all greedy
    max_num_logprobs: int | None  # the largest top-N asked; None when no row asks
    token_bitmask: torch.Tensor | None = None  # int32 [N, ceil(V / 32)] on the device (StepPlan.token_bitmask)
    grammar_rows: list[int] = field(default_factory=list)  # the rows whose bitmask forbids some token

    @classmethod
    def build(cls, rows: list[RowSampling], vocab_size: int, device: torch.device,
              token_bitmask: torch.Tensor | None = None) -> "SamplingBatch":
        """``token_bitmask`` is the plan's (see :attr:`StepPlan.token_bitmask`)."""
        num_rows = len(rows)
        sampled = [not p.greedy for p in rows]

        def per_row(
            values: list[float],
            neutral: float,
            dtype: torch.dtype = torch.float32,
            only_sampled: bool = False,
        ) -> torch.Tensor | None:
            """One setting as a row tensor, or None when every row holds its neutral value.
            With ``only_sampled`` greedy rows get the neutral value: the setting only shapes a draw."""
            if only_sampled:
                values = [value if s else neutral for value, s in zip(values, sampled)]
            if all(value == neutral for value in values):
                return None
            return to_device(values, device, dtype)

        # A penalty below float32's smallest normal would round to 0 and turn logits into NaN.
        repetition_penalty = per_row([max(p.repetition_penalty, _FLOAT32_TINY) for p in rows], 1.0)
        frequency_penalty = per_row([p.frequency_penalty for p in rows], 0.0)
        presence_penalty = per_row([p.presence_penalty for p in rows], 0.0)
        top_k = [min(p.top_k, vocab_size) if p.top_k > 0 else vocab_size for p in rows]
        seen_token_mask = output_token_counts = None
        if repetition_penalty is not None:
            seen = [p.prompt_token_ids + p.output_token_ids for p in rows]
            seen_token_mask = _token_counts(seen, vocab_size, device) > 0
        if frequency_penalty is not None or presence_penalty is not None:
            output_token_counts = _token_counts([p.output_token_ids for p in rows], vocab_size, device)
        return cls(
            num_rows=num_rows,
            vocab_size=vocab_size,
            all_greedy=not any(sampled),
            greedy=None if all(sampled) else to_device([not s for s in sampled], device),
            temperature=per_row([p.temperature for p in rows], 1.0, only_sampled=True),
            top_k=per_row(top_k, vocab_size, torch.long, only_sampled=True),
            max_top_k=max((k for k, s in zip(top_k, sampled) if s and k < vocab_size), default=0),
            top_p=per_row([p.top_p for p in rows], 1.0, only_sampled=True),
            min_p=per_row([p.min_p for p in rows], 0.0, only_sampled=True),
            repetition_penalty=repetition_penalty,
            seen_token_mask=seen_token_mask,
            frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty,
            output_token_counts=output_token_counts,
            min_tokens_ban=_min_tokens_ban(rows, vocab_size, device),
            logit_bias=_logit_bias(rows, device),
            draw_uniforms=None if not any(sampled) else to_device(
                [draw_uniform(p.seed, p.draw_index) if s else 0.0 for p, s in zip(rows, sampled)], device, torch.float64),
            max_num_logprobs=max((p.num_logprobs for p in rows if p.num_logprobs is not None), default=None),
            token_bitmask=None if token_bitmask is None else tensor_to_device(token_bitmask, device),
            grammar_rows=[] if token_bitmask is None else constrained_rows(token_bitmask),
        )


@dataclass
class SamplerOutput:
    """One sampled token per row, with log-probs of the model's own distribution."""

    token_ids: torch.Tensor  # [N] long
    logprobs: torch.Tensor | None  # [N] float32, of the sampled token under the raw logits; None when no row asks
    top_token_ids: torch.Tensor | None  # [N, K] long, K = batch.max_num_logprobs
    top_logprobs: torch.Tensor | None  # [N, K] float32, descending
    ranks: torch.Tensor | None  # [N] long: 1 + how many tokens the raw model found likelier than the sampled one


class Sampler:
    """Applies each row's constraints and penalties to the logits, then picks its token.

    Log-probs come from the unmodified logits, as vLLM reports them by default (its
    ``raw_logprobs``): they describe what the model predicted, before a grammar, logit_bias,
    penalties and temperature reshaped the distribution.
    """

    def __call__(self, logits: torch.Tensor, batch: SamplingBatch) -> SamplerOutput:
        if logits.shape != (batch.num_rows, batch.vocab_size):
            raise ValueError(
                f"logits must have shape [{batch.num_rows}, {batch.vocab_size}] to match the sampling "
                f"batch, got {list(logits.shape)}"
            )
        logits = logits.float()
        constrained = _apply_grammar(logits, batch)
        shaped = _apply_penalties(_apply_logit_bias(_apply_min_tokens(constrained, batch), batch), batch)
        token_ids = _sample(shaped, batch)
        if batch.max_num_logprobs is None:  # a pass over [N, vocab] saved when nobody reads it
            return SamplerOutput(token_ids, None, None, None, None)
        log_normaliser = logits.logsumexp(dim=-1)
        top_values, top_token_ids = logits.topk(min(batch.max_num_logprobs, batch.vocab_size), dim=-1)
        top_logprobs = top_values - log_normaliser.unsqueeze(1)
        chosen = logits.gather(1, token_ids.unsqueeze(1))
        # A log-probability is its logit less the row's normaliser, so ranking logits ranks log-probs.
        ranks = (logits > chosen).sum(dim=-1) + 1
        return SamplerOutput(token_ids, chosen.squeeze(1) - log_normaliser, top_token_ids, top_logprobs, ranks)


def _sample(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Greedy rows take the argmax; the others are reshaped by their settings and drawn, each by its
    own seed and draw counter alone, so a draw depends on nothing else in the batch and never
    touches torch's global RNG."""
    if batch.all_greedy:
        return logits.argmax(dim=-1)
    scaled = logits if batch.temperature is None else logits / batch.temperature.unsqueeze(1)
    # A logit past float32's range (a tiny repetition_penalty or temperature boosting it) is the
    # likeliest, not an infinity that would make the softmax NaN.
    scaled = scaled.clamp(max=_FLOAT32_MAX)
    probs = apply_top_k_top_p(scaled, batch.top_k, batch.top_p, batch.max_top_k).softmax(dim=-1)
    if batch.min_p is not None:
        threshold = batch.min_p.unsqueeze(1) * probs.amax(dim=-1, keepdim=True)
        probs = probs.masked_fill(probs < threshold, 0.0)
    sampled = inverse_cdf_draw(probs, batch.draw_uniforms)
    if batch.greedy is None:
        return sampled
    return torch.where(batch.greedy, logits.argmax(dim=-1), sampled)


def _apply_grammar(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Tokens a row's grammar forbids are masked out before anything else, greedy rows included, so
    no later stage can bring one back; rows without a grammar allow every token."""
    if batch.token_bitmask is None:
        return logits
    return apply_token_bitmask(logits, batch.token_bitmask, batch.grammar_rows)


def _apply_min_tokens(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Rows short of min_tokens cannot end yet: their EOS and stop tokens are masked out."""
    if batch.min_tokens_ban is None:
        return logits
    return logits.index_put(batch.min_tokens_ban, torch.full((), float("-inf"), device=logits.device))


def _apply_logit_bias(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Each row's biases added to its logits, as OpenAI does, before penalties and temperature;
    greedy rows see them too."""
    if batch.logit_bias is None:
        return logits
    rows, token_ids, biases = batch.logit_bias
    return logits.index_put((rows, token_ids), biases, accumulate=True)


def _apply_penalties(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Repetition penalty over prompt and output tokens (shrinks positive logits, grows negative
    ones), then frequency and presence penalties over output tokens only."""
    if batch.repetition_penalty is not None:
        penalty = batch.repetition_penalty.unsqueeze(1)
        penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
        logits = torch.where(batch.seen_token_mask, penalised, logits)
    if batch.frequency_penalty is not None:
        logits = logits - batch.frequency_penalty.unsqueeze(1) * batch.output_token_counts
    if batch.presence_penalty is not None:
        logits = logits - batch.presence_penalty.unsqueeze(1) * (batch.output_token_counts > 0)
    return logits


def _token_counts(token_ids: list[list[int]], vocab_size: int, device: torch.device) -> torch.Tensor:
    """[N, V] float: how often each token occurs in each row's list."""
    longest = max((len(ids) for ids in token_ids), default=0)
    # Padding points at an extra column that is dropped afterwards.
    padded = to_device(
        [ids + [vocab_size] * (longest - len(ids)) for ids in token_ids], device, torch.long
    ).reshape(len(token_ids), longest)
    counts = torch.zeros(len(token_ids), vocab_size + 1, device=device)
    counts.scatter_add_(1, padded, torch.ones_like(padded, dtype=counts.dtype))
    return counts[:, :vocab_size]


def _min_tokens_ban(rows: list[RowSampling], vocab_size: int,
                    device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(row, token) pairs to mask; ids outside the vocabulary can never be sampled, so they are left out.
    A row whose ban would take every token (stop_token_ids naming the whole vocabulary) keeps them
    all: min_tokens cannot be honoured there, and a row with nothing to draw has no next token."""
    banned = [{token_id for token_id in p.banned_token_ids if token_id < vocab_size} for p in rows]
    pairs = [(row, token_id) for row, ids in enumerate(banned) if len(ids) < vocab_size for token_id in sorted(ids)]
    if not pairs:
        return None
    banned_rows, token_ids = zip(*pairs)
    return to_device(banned_rows, device), to_device(token_ids, device)


def _logit_bias(rows: list[RowSampling],
                device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """Every row's biases flattened to (row, token id, bias) triples, so one index_put applies them all."""
    triples = [(row, token_id, bias) for row, p in enumerate(rows) for token_id, bias in p.logit_bias.items()]
    if not triples:
        return None
    biased_rows, token_ids, biases = zip(*triples)
    return (to_device(biased_rows, device), to_device(token_ids, device),
            to_device(biases, device, torch.float32))
