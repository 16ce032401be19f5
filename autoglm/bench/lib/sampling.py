"""How a throughput benchmark's requests pick their tokens, the same on the engine's side and
transformers': greedy by default (both sides then generate the same tokens), or drawn under a
temperature, top-p and top-k, as most served requests are."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from autoglm.cli.settings import add_draw_arguments
from autoglm.sampling_params import SamplingParams


@dataclass(frozen=True)
class BenchSampling:
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: every token

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "BenchSampling":
        return cls(args.temperature, args.top_p, args.top_k)

    def engine_params(self, max_tokens: int) -> SamplingParams:
        """One request's settings, never stopping at EOS so both sides generate as many tokens."""
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                              max_tokens=max_tokens, ignore_eos=True)

    def generate_kwargs(self) -> dict[str, Any]:
        """The same settings for ``model.generate``, whose own defaults (top_k 50) must not apply."""
        if self.temperature == 0:
            return {"do_sample": False}
        return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    add_draw_arguments(parser.add_argument_group("sampling (both sides)"))
