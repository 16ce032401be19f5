"""The grammar cache and grammar states, on a tiny tokenizer without a model."""
from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from autoglm.engine.structured_output import GrammarCache, build_token_bitmask
from autoglm.engine.structured_output.schema_rewrite import bounded_strings_as_patterns
from autoglm.structured_outputs import StructuredOutputsParams
from tests.optional_packages import needs_xgrammar
from tests.tiny_models import EOS_ID, build_tiny_tokenizer

VOCAB_SIZE = 320


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer(VOCAB_SIZE)


def regex(pattern: str) -> StructuredOutputsParams:
    return StructuredOutputsParams(regex=pattern)


@needs_xgrammar
def test_a_compiled_grammar_is_reused_and_the_least_recently_used_dropped(tokenizer):
    cache = GrammarCache(tokenizer, VOCAB_SIZE, {EOS_ID}, capacity=2)
    first = cache.compile(regex("a+"))
    cache.compile(regex("b+"))
    assert cache.compile(regex("a+")) is first  # a hit, and now the most recent
    cache.compile(regex("c+"))
    assert len(cache) == 2
    assert cache.compile(regex("a+")) is first
    assert cache.compile(StructuredOutputsParams(json={"b": 1, "a": 2})) is cache.compile(
        StructuredOutputsParams(json={"a": 2, "b": 1})), "the same schema, keys in another order"


@needs_xgrammar
def test_threads_compiling_at_once_share_one_cache(tokenizer):
    cache = GrammarCache(tokenizer, VOCAB_SIZE, {EOS_ID})
    constraints = [regex(f"[a-z]{{{i}}}") for i in range(1, 5)] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(cache.compile, constraints))
    assert len(cache) == 4


@needs_xgrammar
def test_a_state_follows_the_tokens_it_accepts(tokenizer):
    cache = GrammarCache(tokenizer, VOCAB_SIZE, {EOS_ID})
    state = cache.new_state(StructuredOutputsParams(choice=["ab"]))
    a, b = tokenizer.convert_tokens_to_ids(["a", "b"])

    def allowed() -> set[int]:
        words = build_token_bitmask([state])[0]
        return {token for token in range(VOCAB_SIZE) if words[token // 32] >> (token % 32) & 1}

    assert b not in allowed() and a in allowed()
    state.accept(a)
    assert allowed() == {b}
    state.accept(b)
    assert allowed() == {EOS_ID}
    assert state.terminates(EOS_ID) and not state.terminates(b)
    state.accept(a)  # refused on the mask thread, raised where the next mask is read
    with pytest.raises(RuntimeError, match="refused token"):
        allowed()


def test_a_step_without_grammars_has_no_bitmask():
    assert build_token_bitmask([None, None]) is None


def test_only_length_bounded_strings_without_a_pattern_are_rewritten():
    schema = {"type": "object", "properties": {
        "bounded": {"type": "string", "minLength": 2, "maxLength": 5},
        "capped": {"type": "string", "maxLength": 3},
        "patterned": {"type": "string", "maxLength": 3, "pattern": "^x+$"},
        "free": {"type": "string"},
        "maxLength": {"type": "integer"},
    }}
    properties = bounded_strings_as_patterns(schema)["properties"]
    assert properties["bounded"]["pattern"].endswith("{2,5}$") and "maxLength" not in properties["bounded"]
    assert properties["capped"]["pattern"].endswith("{0,3}$")
    assert properties["patterned"] == schema["properties"]["patterned"]
    assert properties["free"] == {"type": "string"} and properties["maxLength"] == {"type": "integer"}


def test_unconstrained_use_never_imports_xgrammar():
    code = ("import sys; import autoglm.engine.llm_engine, autoglm.runner.model_runner; "
            "assert 'xgrammar' not in sys.modules, 'xgrammar imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
