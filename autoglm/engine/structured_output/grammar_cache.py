"""Compiles constraints to grammars over the model's vocabulary, once each: an LRU keyed by the
constraint, shared by every thread that asks (the server compiles on its worker threads before it
submits a request, the engine again when the request is added, a cache hit then). Its states compute
their masks on the cache's ``workers``."""
from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from transformers import PreTrainedTokenizerBase

from autoglm.engine.structured_output.grammar_state import GrammarState
from autoglm.engine.structured_output.mask_workers import MaskWorkers
from autoglm.engine.structured_output.schema_rewrite import bounded_strings_as_patterns
from autoglm.engine.structured_output.schema_support import check_enforceable
from autoglm.errors import InvalidRequestError
from autoglm.structured_outputs import StructuredOutputsParams

if TYPE_CHECKING:
    import xgrammar

MAX_CACHED_GRAMMARS = 256
# xgrammar's messages start with a timestamp and the C++ source line: "[12:00:00] /x/y.cc:94: ".
_NATIVE_PREFIX = re.compile(r"^\[[^\]]*\]\s*\S+:\d+:\s*")


class GrammarCache:
    """Compiled grammars by ``StructuredOutputsParams.cache_key()``, the least recently used dropped
    past ``capacity``. xgrammar is imported, and the vocabulary read, on the first compile only."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, vocab_size: int, stop_token_ids: Iterable[int],
                 capacity: int = MAX_CACHED_GRAMMARS) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size  # the logits' width, which may exceed the tokenizer's
        self.stop_token_ids = sorted(stop_token_ids)
        self.capacity = capacity
        self._lock = threading.Lock()
        self._compiler: xgrammar.GrammarCompiler | None = None
        self._compiled: OrderedDict[str, xgrammar.CompiledGrammar] = OrderedDict()
        self.workers = MaskWorkers()

    def __len__(self) -> int:
        return len(self._compiled)

    def compile(self, constraint: StructuredOutputsParams) -> xgrammar.CompiledGrammar:
        """The constraint's grammar, from the cache or compiled now; a schema, regex or grammar
        that does not compile raises InvalidRequestError naming the field and xgrammar's reason.
        Two threads missing the same key at once both compile it; the cache keeps one."""
        key = constraint.cache_key()
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
                return compiled
        compiled = self._compile(constraint)
        with self._lock:
            self._compiled[key] = compiled
            self._compiled.move_to_end(key)
            while len(self._compiled) > self.capacity:
                self._compiled.popitem(last=False)
        return compiled

    def new_state(self, constraint: StructuredOutputsParams) -> GrammarState:
        """A fresh matcher at the start of the constraint's grammar, for one sequence; its first mask is
        computed from now on."""
        return GrammarState(self.compile(constraint), self.vocab_size, self.workers)

    def _compile(self, constraint: StructuredOutputsParams) -> xgrammar.CompiledGrammar:
        compiler = self._get_compiler()
        kind = constraint.kind
        try:
            if kind == "json":
                check_enforceable(constraint.json, "structured_outputs.json")
                # Whitespace fixed to ", " and ": ": free whitespace would let a weak model pad forever.
                schema = json.dumps(bounded_strings_as_patterns(constraint.json))
                return compiler.compile_json_schema(schema, any_whitespace=False)
            if kind == "json_object":
                return compiler.compile_json_schema('{"type": "object"}', any_whitespace=False, strict_mode=False)
            if kind == "regex":
                return compiler.compile_regex(constraint.regex)
            if kind == "choice":
                return compiler.compile_grammar(choice_grammar(constraint.choice))
            return compiler.compile_grammar(constraint.grammar)
        except RuntimeError as error:
            reason = _NATIVE_PREFIX.sub("", str(error).strip())
            raise InvalidRequestError(f"structured_outputs.{kind} does not compile: {reason}",
                                      param=f"structured_outputs.{kind}") from None

    def _get_compiler(self) -> xgrammar.GrammarCompiler:
        with self._lock:
            if self._compiler is None:
                import xgrammar

                info = xgrammar.TokenizerInfo.from_huggingface(
                    self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=self.stop_token_ids)
                # This class is the cache; xgrammar's own would hold every grammar a second time.
                self._compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)
            return self._compiler


def choice_grammar(choices: tuple[str, ...]) -> str:
    """An EBNF grammar matching exactly one of ``choices``: JSON string literals are EBNF ones."""
    return "root ::= " + " | ".join(json.dumps(choice, ensure_ascii=False) for choice in choices)
