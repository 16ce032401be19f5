"""The reasoning parsers the server can be told to use, by name (vLLM's names)."""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.errors import named_entry
from autoglm.server.reasoning.think_tags import ThinkTagParser
from autoglm.thinking import ThinkingPhase


@dataclass(frozen=True)
class ReasoningParserSpec:
    key: str  # the name the server's reasoning parser setting takes
    start: str
    end: str
    # The model thinks first whatever the prompt says, and may leave the start marker out: a prompt
    # that leaves thinking to the model counts as one that opened it.
    always_thinks: bool

    def new_parser(self, phase: ThinkingPhase) -> ThinkTagParser:
        """A parser for one output, given the phase the prompt left thinking in (phase.py)."""
        return ThinkTagParser(self.start, self.end, self.output_phase(phase), skips_leading_start=self.always_thinks)

    def output_phase(self, phase: ThinkingPhase) -> ThinkingPhase:
        """Where the output's thinking starts, given the prompt's phase: a model that always thinks is
        thinking from its first token unless the prompt closed it."""
        if self.always_thinks and phase is ThinkingPhase.NOT_BEGUN:
            return ThinkingPhase.OPEN
        return phase


REASONING_PARSERS: dict[str, ReasoningParserSpec] = {spec.key: spec for spec in (
    ReasoningParserSpec("glm45", "<think>", "</think>", always_thinks=False),  # GLM-4.5 to 4.7, GLM-4.1V, AutoGLM
    ReasoningParserSpec("qwen3", "<think>", "</think>", always_thinks=False),
    ReasoningParserSpec("deepseek_r1", "<think>", "</think>", always_thinks=True),
)}


def reasoning_parser_named(key: str) -> ReasoningParserSpec:
    """The parser a reasoning parser setting names."""
    return named_entry(REASONING_PARSERS, "reasoning parser", key)
