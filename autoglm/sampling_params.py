"""Per-request sampling settings, named and defaulted as in vLLM so users find what they know."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from autoglm.errors import InvalidRequestError, quote_value
from autoglm.structured_outputs import StructuredOutputsParams
from autoglm.thinking import ThinkingBounds, ThinkingPhase

MAX_N = 16
MAX_LOGPROBS = 20
# OpenAI's range for a logit_bias value: -100 bans a token in effect, 100 all but forces it.
MAX_LOGIT_BIAS = 100
# Below this temperature a softmax is a one-hot in float32, so such requests are decoded greedily.
GREEDY_TEMPERATURE = 1e-5
# The range torch.Generator.manual_seed accepts.
MIN_SEED, MAX_SEED = -(2**63), 2**64 - 1
# Token ids and top_k travel to tensor-parallel workers as int64.
MAX_INT64 = 2**63 - 1


class RequestOutputKind(Enum):
    """When the engine hands out a request's output, and how much of it (vLLM's names). The default is
    DELTA, where vLLM's is CUMULATIVE: re-sending the whole output every step costs time in proportion
    to its length at each step, quadratic over a long generation, so it is asked for by name."""

    CUMULATIVE = "cumulative"  # every step that produced tokens: everything so far
    DELTA = "delta"  # every step that produced tokens: only what is new since the last output
    FINAL_ONLY = "final_only"  # once, when the request has finished: everything


_FLOAT_FIELDS = (
    "temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
)
_INT_FIELDS = ("n", "top_k", "min_tokens")
_OPTIONAL_INT_FIELDS = ("seed", "max_tokens", "logprobs", "prompt_logprobs")
_BOOL_FIELDS = ("ignore_eos", "skip_special_tokens", "include_stop_str_in_output")


@dataclass
class SamplingParams:
    """How to pick each next token and when to stop. Checked on construction, so the engine
    never meets a bad value mid-batch; ``stop`` and ``stop_token_ids`` become lists and
    ``logit_bias`` a dict. Token ids are checked against the vocabulary by ``check_vocab``."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: disabled
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    logit_bias: dict[int, float] | None = None  # token id -> added to its logit before penalties and sampling
    ignore_eos: bool = False
    max_tokens: int | None = 16  # None: up to the context limit, resolved by the engine
    min_tokens: int = 0
    logprobs: int | None = None  # top-N log-probs returned per generated token
    prompt_logprobs: int | None = None  # top-N log-probs returned per prompt token
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    output_kind: RequestOutputKind = RequestOutputKind.DELTA
    structured_outputs: StructuredOutputsParams | None = None  # what the output must match (a grammar)
    thinking: ThinkingBounds | None = None  # the thinking's markers, phase and budget; a grammar then binds the answer

    def __post_init__(self) -> None:
        self._check_types()
        self.stop = _normalise_stop(self.stop)
        self.stop_token_ids = _normalise_stop_token_ids(self.stop_token_ids)
        self.logit_bias = _normalise_logit_bias(self.logit_bias)
        self._check_ranges()

    def check_vocab(self, vocab_size: int) -> None:
        """Refuse token ids the model cannot produce; only the engine knows the vocabulary's size."""
        for token_id in self.logit_bias:
            _require(token_id < vocab_size, "logit_bias", f"keyed by token ids in [0, {vocab_size})", token_id)
        if self.thinking is not None:
            for name in ("start_token_id", "end_token_id"):
                token_id = getattr(self.thinking, name)
                _require(token_id < vocab_size, f"thinking.{name}", f"a token id in [0, {vocab_size})", token_id)

    @property
    def greedy(self) -> bool:
        """Whether the request takes the most likely token at every step."""
        return self.temperature < GREEDY_TEMPERATURE

    def _check_types(self) -> None:
        for name in _FLOAT_FIELDS:
            _require(_is_number(getattr(self, name)), name, "a number", getattr(self, name))
        for name in _INT_FIELDS:
            _require(_is_int(getattr(self, name)), name, "an int", getattr(self, name))
        for name in _OPTIONAL_INT_FIELDS:
            value = getattr(self, name)
            _require(value is None or _is_int(value), name, "an int or None", value)
        for name in _BOOL_FIELDS:
            _require(isinstance(getattr(self, name), bool), name, "a bool", getattr(self, name))
        kinds = " or ".join(f"RequestOutputKind.{kind.name}" for kind in RequestOutputKind)
        _require(isinstance(self.output_kind, RequestOutputKind), "output_kind", kinds, self.output_kind)
        constraint = self.structured_outputs
        _require(constraint is None or isinstance(constraint, StructuredOutputsParams), "structured_outputs",
                 "a StructuredOutputsParams or None", constraint)
        _require(self.thinking is None or isinstance(self.thinking, ThinkingBounds), "thinking",
                 "a ThinkingBounds or None", self.thinking)
        if self.thinking is not None:
            _check_thinking(self.thinking)

    def _check_ranges(self) -> None:
        _require(1 <= self.n <= MAX_N, "n", f"in [1, {MAX_N}]", self.n)
        _require(0 <= self.temperature <= 2, "temperature", "in [0, 2]", self.temperature)
        _require(0 < self.top_p <= 1, "top_p", "in (0, 1]", self.top_p)
        _require(-1 <= self.top_k <= MAX_INT64, "top_k", "-1, 0 (disabled) or in [1, 2**63 - 1]", self.top_k)
        _require(0 <= self.min_p <= 1, "min_p", "in [0, 1]", self.min_p)
        for name in ("presence_penalty", "frequency_penalty"):
            _require(-2 <= getattr(self, name) <= 2, name, "in [-2, 2]", getattr(self, name))
        penalty = self.repetition_penalty
        _require(0 < penalty <= 2, "repetition_penalty", "in (0, 2]", penalty)
        if self.seed is not None:
            _require(MIN_SEED <= self.seed <= MAX_SEED, "seed", "in [-2**63, 2**64 - 1]", self.seed)
        if self.max_tokens is not None:
            _require(self.max_tokens >= 1, "max_tokens", ">= 1 or None", self.max_tokens)
            allowed = f"in [0, max_tokens={self.max_tokens}]"
            _require(0 <= self.min_tokens <= self.max_tokens, "min_tokens", allowed, self.min_tokens)
        else:
            _require(self.min_tokens >= 0, "min_tokens", ">= 0", self.min_tokens)
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None:
                _require(0 <= value <= MAX_LOGPROBS, name, f"in [0, {MAX_LOGPROBS}] or None", value)


def _check_thinking(thinking: ThinkingBounds) -> None:
    """The markers are two distinct token ids, the phase a ThinkingPhase, the budget a count of tokens."""
    for name in ("start_token_id", "end_token_id"):
        token_id = getattr(thinking, name)
        _require(_is_int(token_id) and 0 <= token_id <= MAX_INT64, f"thinking.{name}",
                 "a token id (an int in [0, 2**63 - 1])", token_id)
    _require(thinking.end_token_id != thinking.start_token_id, "thinking.end_token_id",
             f"a token other than thinking.start_token_id ({thinking.start_token_id})", thinking.end_token_id)
    phases = " or ".join(f"ThinkingPhase.{phase.name}" for phase in ThinkingPhase)
    _require(isinstance(thinking.phase, ThinkingPhase), "thinking.phase", phases, thinking.phase)
    budget = thinking.budget
    _require(budget is None or (_is_int(budget) and budget >= 0), "thinking.budget", "an int >= 0 or None", budget)


def _normalise_stop(stop: object) -> list[str]:
    """One stop string or several become a list; each must be a non-empty string."""
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    _require(isinstance(stops, list), "stop", "a string, a list of strings or None", stop)
    for item in stops:
        _require(isinstance(item, str) and item != "", "stop", "made of non-empty strings", stop)
    return list(stops)


def _normalise_stop_token_ids(stop_token_ids: object) -> list[int]:
    if stop_token_ids is None:
        return []
    allowed = "a list of token ids (ints in [0, 2**63 - 1]) or None"
    _require(isinstance(stop_token_ids, list), "stop_token_ids", allowed, stop_token_ids)
    for token_id in stop_token_ids:
        _require(_is_int(token_id) and 0 <= token_id <= MAX_INT64, "stop_token_ids", allowed, stop_token_ids)
    return list(stop_token_ids)


def _normalise_logit_bias(logit_bias: object) -> dict[int, float]:
    if logit_bias is None:
        return {}
    allowed = f"a dict of token id (int >= 0) to bias (a number in [-{MAX_LOGIT_BIAS}, {MAX_LOGIT_BIAS}]) or None"
    _require(isinstance(logit_bias, dict), "logit_bias", allowed, logit_bias)
    for token_id, bias in logit_bias.items():
        _require(_is_int(token_id) and token_id >= 0, "logit_bias", allowed, {token_id: bias})
        _require(_is_number(bias) and abs(bias) <= MAX_LOGIT_BIAS, "logit_bias", allowed, {token_id: bias})
    return {token_id: float(bias) for token_id, bias in logit_bias.items()}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _require(ok: bool, name: str, allowed: str, value: object) -> None:
    if not ok:
        raise InvalidRequestError(f"{name} must be {allowed}, got {quote_value(value)}")
