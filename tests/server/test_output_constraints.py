"""The request fields that constrain the output, mapped to StructuredOutputsParams without a server."""
from __future__ import annotations

import asyncio
import threading
from functools import partial

import pytest

from autoglm.errors import InvalidRequestError
from autoglm.sampling_params import SamplingParams
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.output_constraints import OutputConstraint, compile_grammar, requested_constraint
from autoglm.server.openai.protocol import ChatCompletionRequest, CompletionRequest
from autoglm.server.openai.sampling import chat_sampling_params, completion_sampling_params
from autoglm.structured_outputs import StructuredOutputsParams

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
VOCAB = 512
CHECK_PARAMS = partial(SamplingParams.check_vocab, vocab_size=VOCAB)  # the engine's check for that vocabulary


def completion(**fields: object) -> CompletionRequest:
    return CompletionRequest.model_validate({"prompt": "Hi", **fields})


def chat(**fields: object) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "Hi"}], **fields})


@pytest.mark.parametrize("fields, expected, field", [
    ({"response_format": {"type": "json_object"}}, StructuredOutputsParams(json_object=True), "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}}},
     StructuredOutputsParams(json=SCHEMA), "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "any"}}},
     StructuredOutputsParams(json={}), "response_format.json_schema.schema"),
    ({"structured_outputs": {"json": SCHEMA}}, StructuredOutputsParams(json=SCHEMA), "structured_outputs"),
    ({"structured_outputs": {"json_object": True}}, StructuredOutputsParams(json_object=True), "structured_outputs"),
    ({"structured_outputs": {"regex": "[a-z]+"}}, StructuredOutputsParams(regex="[a-z]+"), "structured_outputs"),
    ({"structured_outputs": {"choice": ["y", "n"]}}, StructuredOutputsParams(choice=["y", "n"]), "structured_outputs"),
    ({"structured_outputs": {"grammar": 'root ::= "a"'}}, StructuredOutputsParams(grammar='root ::= "a"'),
     "structured_outputs"),
    ({"guided_json": SCHEMA}, StructuredOutputsParams(json=SCHEMA), "guided_json"),
    ({"guided_json": '{"type": "string"}'}, StructuredOutputsParams(json={"type": "string"}), "guided_json"),
    ({"guided_regex": "[0-9]{3}"}, StructuredOutputsParams(regex="[0-9]{3}"), "guided_regex"),
    ({"guided_choice": ["red", "blue"]}, StructuredOutputsParams(choice=["red", "blue"]), "guided_choice"),
    ({"guided_grammar": 'root ::= "x"'}, StructuredOutputsParams(grammar='root ::= "x"'), "guided_grammar"),
])
@pytest.mark.parametrize("request_of", [completion, chat])
def test_each_field_asks_for_its_constraint_on_both_endpoints(request_of, fields, expected, field):
    assert requested_constraint(request_of(**fields)) == OutputConstraint(expected, field)


@pytest.mark.parametrize("fields", [{}, {"response_format": {"type": "text"}}])
def test_plain_text_asks_for_no_constraint(fields):
    assert requested_constraint(chat(**fields)) is None


@pytest.mark.parametrize("fields, names", [
    ({"response_format": {"type": "json_object"}, "guided_regex": "a"}, ("response_format", "guided_regex")),
    ({"guided_json": SCHEMA, "guided_choice": ["a"]}, ("guided_json", "guided_choice")),
    ({"structured_outputs": {"regex": "a"}, "guided_grammar": 'root ::= "a"'}, ("structured_outputs", "guided_grammar")),
])
def test_two_fields_constraining_the_output_are_refused_naming_both(fields, names):
    with pytest.raises(APIError) as caught:
        requested_constraint(chat(**fields))
    assert caught.value.status == 400
    assert str(caught.value) == f"{names[0]} and {names[1]} both constrain the output; give only one of them"
    assert caught.value.body.error.param == names[1]


@pytest.mark.parametrize("fields, param, message", [
    ({"guided_regex": ""}, "guided_regex", "guided_regex must be a non-empty string, got ''"),
    ({"guided_choice": []}, "guided_choice", "guided_choice must be a non-empty list of non-empty strings"),
    ({"guided_json": "{not json"}, "guided_json", "guided_json is not valid JSON"),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs",
     "structured_outputs must set exactly one of json, json_object, regex, choice, grammar; got regex, choice"),
    ({"structured_outputs": {}}, "structured_outputs", "structured_outputs must set exactly one of"),
])
def test_a_bad_constraint_is_a_400_naming_the_field_the_request_used(fields, param, message):
    with pytest.raises(APIError) as caught:
        requested_constraint(completion(**fields))
    assert caught.value.status == 400
    assert caught.value.body.error.param == param and str(caught.value).startswith(message)


def test_the_constraint_reaches_the_sampling_params_of_both_endpoints():
    constraint = OutputConstraint(StructuredOutputsParams(regex="[a-z]"), "guided_regex")
    assert chat_sampling_params(chat(), CHECK_PARAMS, 1, constraint).structured_outputs == constraint.params
    assert completion_sampling_params(completion(), CHECK_PARAMS, 1, constraint).structured_outputs == constraint.params
    assert chat_sampling_params(chat(), CHECK_PARAMS, 1, None).structured_outputs is None


class RefusingEngine:
    """Stands in for LLMEngine.compile_grammar: refuses every constraint, recording the thread it ran on."""

    def __init__(self, message: str, param: str) -> None:
        self.error = InvalidRequestError(message, param=param)
        self.thread: threading.Thread | None = None

    def compile_grammar(self, constraint: StructuredOutputsParams) -> None:
        self.thread = threading.current_thread()
        raise self.error


@pytest.mark.parametrize("field, engine_param, engine_message, message", [
    ("response_format.json_schema.schema", "structured_outputs.json", "structured_outputs.json is not a valid "
     "JSON schema: bad", "response_format.json_schema.schema is not a valid JSON schema: bad"),
    ("guided_regex", "structured_outputs", "cannot compile: bad", "guided_regex: cannot compile: bad"),
    ("structured_outputs", "structured_outputs.grammar", "structured_outputs.grammar is not valid EBNF",
     "structured_outputs.grammar is not valid EBNF"),
])
def test_a_grammar_the_engine_refuses_is_a_400_naming_the_request_field_compiled_off_the_event_loop(
        field, engine_param, engine_message, message):
    engine = RefusingEngine(engine_message, engine_param)
    constraint = OutputConstraint(StructuredOutputsParams(regex="a"), field)
    with pytest.raises(APIError) as caught:
        asyncio.run(compile_grammar(engine, constraint))
    assert caught.value.status == 400 and str(caught.value) == message
    assert caught.value.body.error.param == (engine_param if field == "structured_outputs" else field)
    assert engine.thread is not None and engine.thread is not threading.main_thread()


class HangingEngine:
    """Stands in for LLMEngine.compile_grammar: compiles until the test lets it end."""

    def __init__(self) -> None:
        self.done = threading.Event()

    def compile_grammar(self, constraint: StructuredOutputsParams) -> None:
        self.done.wait(60)


@pytest.mark.parametrize("field, param", [("guided_regex", "guided_regex"),
                                          ("structured_outputs", "structured_outputs.regex")])
def test_a_grammar_that_compiles_past_the_timeout_is_a_400_naming_its_field(field, param):
    engine = HangingEngine()

    async def scenario() -> None:
        try:
            await compile_grammar(engine, OutputConstraint(StructuredOutputsParams(regex="a"), field), 0.01)
        finally:
            engine.done.set()  # before asyncio.run waits for the compiling thread

    with pytest.raises(APIError) as caught:
        asyncio.run(scenario())
    assert caught.value.status == 400 and caught.value.body.error.param == param
    assert str(caught.value) == f"{param} takes longer than 0.01 seconds to compile into a grammar; give a smaller one"


def test_no_constraint_compiles_nothing():
    engine = RefusingEngine("never", "structured_outputs")
    asyncio.run(compile_grammar(engine, None))
    assert engine.thread is None


@pytest.mark.parametrize("response_format, message", [
    ({"type": "json_schema"}, "json_schema must be given when type is 'json_schema', and only then"),
    ({"type": "text", "json_schema": {"name": "a"}}, "json_schema must be given when type is 'json_schema'"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {}, "shema": {}}}, "unknown parameter"),
])
def test_malformed_response_formats_are_refused(response_format, message):
    with pytest.raises(ValueError, match=message):
        chat(response_format=response_format)
