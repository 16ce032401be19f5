"""Structured output on the engine side: constraints compiled to grammars (``GrammarCache``), each
sequence's place in its grammar (``GrammarState``), whose masks worker threads compute off the
step (``MaskWorkers``), its place between thinking and answer (``ThinkingState``), both joined in
what limits its next token (``SequenceConstraint``), and the step's token bitmask built from them
(``build_token_bitmask``). xgrammar is imported only when the first constraint is compiled."""
from autoglm.engine.structured_output.bitmask import build_token_bitmask
from autoglm.engine.structured_output.grammar_cache import GrammarCache
from autoglm.engine.structured_output.grammar_state import GrammarState
from autoglm.engine.structured_output.mask_workers import MaskWorkers
from autoglm.engine.structured_output.sequence_constraint import SequenceConstraint, new_constraint
from autoglm.engine.structured_output.thinking_state import OutputPhase, ThinkingState

__all__ = ["GrammarCache", "GrammarState", "MaskWorkers", "OutputPhase", "SequenceConstraint", "ThinkingState",
           "build_token_bitmask", "new_constraint"]
