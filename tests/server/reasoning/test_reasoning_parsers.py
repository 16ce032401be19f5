"""Reasoning apart from the answer, by where the prompt left thinking: whole and streamed however the
text is cut, and the answer's tool calls read after it."""
from __future__ import annotations

import json

import jinja2
import pytest

from autoglm.server.reasoning.phase import prompt_phase
from autoglm.server.reasoning.registry import (REASONING_PARSERS,
                                               reasoning_parser_named)
from autoglm.server.reasoning.split import ReasoningSplit
from autoglm.server.reasoning.stream import ReasoningStream
from autoglm.server.tool_calls.families import tool_call_family_named
from autoglm.server.tool_calls.stream import visible_content
from autoglm.thinking import ThinkingPhase
from tests.server.tool_calls.replies import TOOLS
from tests.server.tool_calls.streaming import SPLITS, split, stream_calls, train_tokenizer
from tests.server.tool_calls.templates import GLM45_TEMPLATE, GLM47_TEMPLATE

OPEN, CLOSED, NOT_BEGUN = ThinkingPhase.OPEN, ThinkingPhase.CLOSED, ThinkingPhase.NOT_BEGUN


@pytest.mark.parametrize("generation_prompt, phase", [
    ("<|assistant|>", NOT_BEGUN),
    ("<|im_start|>assistant\n", NOT_BEGUN),
    ("<|assistant|>\n<think></think>", CLOSED),
    ("<|assistant|></think>", CLOSED),
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", CLOSED),
    ("<|im_start|>assistant\n<think>\n", OPEN),
    ("<|assistant|><think>", OPEN),
])
def test_the_last_marker_the_generation_prompt_writes_decides_the_phase(generation_prompt, phase):
    assert prompt_phase(generation_prompt, "<think>", "</think>") is phase


@pytest.mark.parametrize("template, enable_thinking, phase", [
    (GLM45_TEMPLATE, None, NOT_BEGUN), (GLM45_TEMPLATE, False, CLOSED),
    (GLM47_TEMPLATE, None, OPEN), (GLM47_TEMPLATE, False, CLOSED),
])
def test_the_glm_templates_generation_prompts_leave_thinking_as_their_models_expect(template, enable_thinking, phase):
    options = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    render = jinja2.Environment().from_string(template).render
    conversation = render(messages=[{"role": "user", "content": "Hi"}], add_generation_prompt=False, **options)
    prompt = render(messages=[{"role": "user", "content": "Hi"}], add_generation_prompt=True, **options)
    assert prompt.startswith(conversation)
    assert prompt_phase(prompt[len(conversation):], "<think>", "</think>") is phase


def test_the_reasoning_parsers_are_found_by_name():
    assert list(REASONING_PARSERS) == ["glm45", "qwen3", "deepseek_r1"]
    for key, spec in REASONING_PARSERS.items():
        assert reasoning_parser_named(key) is spec and spec.key == key
        assert (spec.start, spec.end) == ("<think>", "</think>")
    assert [key for key, spec in REASONING_PARSERS.items() if spec.always_thinks] == ["deepseek_r1"]
    with pytest.raises(ValueError) as refused:
        reasoning_parser_named("r1")
    assert str(refused.value) == "unknown reasoning parser 'r1'; known: glm45, qwen3, deepseek_r1"


MAY_THINK = ["glm45", "qwen3"]  # the models that think only where the prompt asks
EVERY = [*MAY_THINK, "deepseek_r1"]
# (parsers, phase, text, reasoning, content, ended)
SPLITS_BY_PHASE = [
    (EVERY, OPEN, "Zürich < 北京?\nHmm.</think>\n\nIt is.", "Zürich < 北京?\nHmm.", "It is.", True),
    (EVERY, OPEN, "Cut off while </thin", "Cut off while </thin", "", False),
    (MAY_THINK, OPEN, "<think>x</think>y", "<think>x", "y", True),  # only R1 writes the start marker again
    (["deepseek_r1"], OPEN, "\n<think>\nx</think>y", "\nx", "y", True),
    (EVERY, CLOSED, "\nAnswer, </think> and all.", "", "Answer, </think> and all.", False),
    (EVERY, NOT_BEGUN, "\n<think>Plan.</think>\nAnswer\n", "Plan.", "Answer\n", True),
    (EVERY, NOT_BEGUN, "<think></think>\nAnswer", "", "Answer", True),
    (MAY_THINK, NOT_BEGUN, "\nAnswer <think>x</think>", "", "\nAnswer <think>x</think>", False),
    (MAY_THINK, NOT_BEGUN, "<thin", "", "<thin", False),
    (["deepseek_r1"], NOT_BEGUN, "Plan.</think>Answer", "Plan.", "Answer", True),  # thinks first, unopened
    (["deepseek_r1"], NOT_BEGUN, "<thin", "<thin", "", False),
]
CASES = [pytest.param(key, phase, text, ReasoningSplit(reasoning, content, ended), id=f"{key} {phase.value} {text!r}")
         for keys, phase, text, reasoning, content, ended in SPLITS_BY_PHASE for key in keys]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer([case[2] for case in SPLITS_BY_PHASE] + [case[3] for case in THINKING_THEN_CALLS])


@pytest.mark.parametrize("key, phase, text, whole", CASES)
def test_a_whole_reply_splits_into_reasoning_and_answer(key, phase, text, whole):
    assert reasoning_parser_named(key).new_parser(phase).parse(text, final=True) == whole


@pytest.mark.parametrize("how", SPLITS)
@pytest.mark.parametrize("key, phase, text, whole", CASES)
def test_a_streamed_reply_adds_up_to_the_whole(key, phase, text, whole, how, tokenizer):
    stream = ReasoningStream(reasoning_parser_named(key).new_parser(phase))
    pieces = split(text, how, tokenizer)
    sent = [stream.advance(piece, final=number == len(pieces) - 1) for number, piece in enumerate(pieces)]
    assert "".join(reasoning for reasoning, _ in sent) == whole.reasoning
    assert "".join(content for _, content in sent) == whole.content


@pytest.mark.parametrize("key, phase, text, whole", CASES)
def test_each_prefix_splits_into_prefixes_of_the_whole(key, phase, text, whole):
    parser = reasoning_parser_named(key).new_parser(phase)
    for end in range(len(text) + 1):
        partial = parser.parse(text[:end], final=False)
        assert whole.reasoning.startswith(partial.reasoning) and whole.content.startswith(partial.content)
        assert not partial.ended or whole.ended


def test_only_what_may_start_a_marker_is_held_back():
    stream = ReasoningStream(reasoning_parser_named("glm45").new_parser(NOT_BEGUN))
    assert stream.advance("\n<thi", final=False) == ("", "")
    assert stream.advance("nk>Let me see </thi", final=False) == ("Let me see ", "")
    assert stream.advance("s is no end", final=False) == ("</this is no end", "")
    assert stream.advance("</think>\n", final=False) == ("", "")
    assert stream.advance("\nAnswer", final=True) == ("", "Answer")


CALL = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n</tool_call>"
# (reasoning parser, phase, tool-call parser, text, reasoning, calls)
THINKING_THEN_CALLS = [
    ("glm45", NOT_BEGUN, "glm45", f"\n<think>They ask about 北京 < 5 days.</think>\nChecking.\n{CALL}",
     "They ask about 北京 < 5 days.", "Checking.\n", [("get_weather", {"city": "北京"})]),
    ("glm45", OPEN, "glm47", "Zürich, then the time.</think><tool_call>get_weather<arg_key>city</arg_key>"
     "<arg_value>Zürich</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>"
     "<tool_call>get_time</tool_call>",
     "Zürich, then the time.", "", [("get_weather", {"city": "Zürich", "days": 2}), ("get_time", {})]),
    ("qwen3", NOT_BEGUN, "qwen3", '<think>\nThe time in "Zürich".\n</think>\n\n<tool_call>\n{"name": "get_time", '
     '"arguments": {"zone": "Europe/Zürich", "at": {"hour": 9}}}\n</tool_call>',
     '\nThe time in "Zürich".\n', "", [("get_time", {"zone": "Europe/Zürich", "at": {"hour": 9}})]),
]


@pytest.mark.parametrize("how", SPLITS)
@pytest.mark.parametrize("reasoning_key, phase, tools_key, text, reasoning, content, calls", THINKING_THEN_CALLS,
                         ids=[case[2] for case in THINKING_THEN_CALLS])
def test_calls_are_read_from_the_answer_after_the_thinking(reasoning_key, phase, tools_key, text, reasoning,
                                                           content, calls, how, tokenizer):
    whole = reasoning_parser_named(reasoning_key).new_parser(phase).parse(text, final=True)
    assert whole.reasoning == reasoning and whole.ended
    parsed = tool_call_family_named(tools_key).new_parser(TOOLS).parse(whole.content, final=True)
    assert visible_content(parsed, final=True) == content
    assert [(call.name, json.loads(call.arguments)) for call in parsed.calls] == calls

    stream = ReasoningStream(reasoning_parser_named(reasoning_key).new_parser(phase))
    pieces = split(text, how, tokenizer)
    sent = [stream.advance(piece, final=number == len(pieces) - 1) for number, piece in enumerate(pieces)]
    assert "".join(piece_reasoning for piece_reasoning, _ in sent) == reasoning
    streamed = stream_calls(tool_call_family_named(tools_key).new_parser(TOOLS), [piece for _, piece in sent])
    assert streamed.content == content
    assert [(name, json.loads(arguments)) for name, arguments in zip(streamed.names, streamed.arguments)] == calls
