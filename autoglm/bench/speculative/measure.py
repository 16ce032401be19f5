"""Run the quoting workload at batch 1 without speculation and with each proposer; compare."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from autoglm.bench.lib.engine_run import bench_llm
from autoglm.bench.speculative.workload import QuotingPrompt
from autoglm.config import AutoGLMConfig
from autoglm.sampling_params import SamplingParams
from autoglm.config.speculative import SpeculativeConfig

PLAIN = "plain"


@dataclass
class SideResult:
    """One engine setting's decode over every prompt, one request at a time."""

    decode_tokens: int = 0  # tokens after each request's first (the first comes from the prefill)
    decode_s: float = 0.0
    outputs: list[list[int]] = field(default_factory=list)
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_tokens / self.decode_s

    @property
    def acceptance_rate(self) -> float | None:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    def to_dict(self) -> dict[str, Any]:
        fields = asdict(self)
        del fields["outputs"]
        return {**fields, "decode_tokens_per_s": self.decode_tokens_per_s, "acceptance_rate": self.acceptance_rate}


def measure_side(config: AutoGLMConfig, prompts: list[QuotingPrompt], output_len: int) -> SideResult:
    """Greedy, EOS ignored, one request at a time after a warm-up request; decode time is first to last token."""
    llm = bench_llm(config)
    params = SamplingParams(temperature=0.0, max_tokens=output_len, ignore_eos=True)
    llm.generate([prompts[0].token_ids], params, use_tqdm=False)
    before = llm.engine.get_stats().spec_decode
    result = SideResult()
    for prompt in prompts:
        (output,) = llm.generate([prompt.token_ids], params, use_tqdm=False)
        result.outputs.append(output.outputs[0].token_ids)
        result.decode_tokens += len(output.outputs[0].token_ids) - 1
        result.decode_s += output.metrics.last_token_time - output.metrics.first_token_time
    after = llm.engine.get_stats().spec_decode
    if after is not None:
        result.num_drafts = after.num_drafts - before.num_drafts
        result.num_draft_tokens = after.num_draft_tokens - before.num_draft_tokens
        result.num_accepted_tokens = after.num_accepted_tokens - before.num_accepted_tokens
        result.accepted_per_position = [count - (before.accepted_per_position[i]
                                                 if i < len(before.accepted_per_position) else 0)
                                        for i, count in enumerate(after.accepted_per_position)]
    return result


def measure_speculative(config: AutoGLMConfig, prompts: list[QuotingPrompt], output_len: int,
                        proposers: dict[str, SpeculativeConfig]) -> dict[str, SideResult]:
    """Plain decoding first, then each named ``speculative_config``, on the same prompts."""
    results = {PLAIN: measure_side(config, prompts, output_len)}
    for name, speculative_config in proposers.items():
        side_config = config.model_copy(update={"speculative_config": speculative_config})
        results[name] = measure_side(side_config, prompts, output_len)
    return results
