"""Structured output through the official openai client: every way of asking for a constraint, on both
endpoints, gives text that matches it, though the tiny model's own output is noise."""
from __future__ import annotations

import json
import re

import jsonschema
import openai
import pytest

from tests.optional_packages import needs_xgrammar
from tests.server.test_errors import assert_still_serving, error_of, post
from tests.server.test_openai_parameters import first_token_id

MODEL = "tiny-llama"
MESSAGES = [{"role": "user", "content": "Describe a pet"}]
PROMPT = "A pet:"
SEEDS = (0, 1, 2)
MAX_TOKENS = 160
# Every string and array bounded, so that a random model must close them well within MAX_TOKENS. The
# strings are ASCII: xgrammar 0.2.9 takes a UTF-8-encoded surrogate for a character, which no UTF-8
# decoder reads as one, so a random model's non-ASCII strings can decode longer than maxLength.
PET_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]{0,6}$"},
        "kind": {"enum": ["cat", "dog", "fish"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 30},
        "owner": {"type": "object", "properties": {"first": {"type": "string", "pattern": "^[A-Za-z]{1,5}$"}},
                  "required": ["first"], "additionalProperties": False},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9]{0,4}$"},
                 "maxItems": 2},
    },
    "required": ["name", "kind", "age", "owner", "tags"],
    "additionalProperties": False,
}
REGEX = r"[a-z]{2,5}-[0-9]{2}"
CHOICES = ["red", "green", "blue"]
GRAMMAR = 'root ::= ("yes" | "no") "!" digit?\ndigit ::= [0-9]'

pytestmark = [pytest.mark.timeout(120), needs_xgrammar]


def json_schema_format(schema: dict[str, object]) -> dict[str, object]:
    return {"type": "json_schema", "json_schema": {"name": "pet", "schema": schema, "strict": True}}


def check_pet(text: str) -> None:
    jsonschema.validate(json.loads(text), PET_SCHEMA)


def check_regex(text: str) -> None:
    assert re.fullmatch(REGEX, text), text


def check_choice(text: str) -> None:
    assert text in CHOICES


def check_grammar(text: str) -> None:
    assert re.fullmatch(r"(yes|no)![0-9]?", text), text


# Each way of asking (request fields, sent in extra_body) and how to check the answer.
CONSTRAINTS = {
    "response_format json_schema": ({"response_format": json_schema_format(PET_SCHEMA)}, check_pet),
    "structured_outputs json": ({"structured_outputs": {"json": PET_SCHEMA}}, check_pet),
    "guided_json": ({"guided_json": json.dumps(PET_SCHEMA)}, check_pet),
    "structured_outputs regex": ({"structured_outputs": {"regex": REGEX}}, check_regex),
    "guided_regex": ({"guided_regex": REGEX}, check_regex),
    "structured_outputs choice": ({"structured_outputs": {"choice": CHOICES}}, check_choice),
    "guided_choice": ({"guided_choice": CHOICES}, check_choice),
    "structured_outputs grammar": ({"structured_outputs": {"grammar": GRAMMAR}}, check_grammar),
    "guided_grammar": ({"guided_grammar": GRAMMAR, "guided_decoding_backend": "xgrammar"}, check_grammar),
}


def chat_text(client: openai.OpenAI, fields: dict[str, object], **options: object) -> tuple[str, str]:
    options = {"max_tokens": MAX_TOKENS, **options}
    reply = client.chat.completions.create(model=MODEL, messages=MESSAGES, extra_body=fields, **options).choices[0]
    return reply.message.content, reply.finish_reason


def completion_text(client: openai.OpenAI, fields: dict[str, object], **options: object) -> tuple[str, str]:
    options = {"max_tokens": MAX_TOKENS, **options}
    choice = client.completions.create(model=MODEL, prompt=PROMPT, extra_body=fields, **options).choices[0]
    return choice.text, choice.finish_reason


@pytest.mark.parametrize("generate", [chat_text, completion_text], ids=["chat", "completions"])
@pytest.mark.parametrize("name", list(CONSTRAINTS))
def test_seeded_sampled_answers_match_the_constraint_and_stop(server, generate, name):
    fields, check = CONSTRAINTS[name]
    client = server.openai()
    for seed in SEEDS:
        text, finish_reason = generate(client, fields, temperature=1.0, seed=seed)
        check(text)
        assert finish_reason == "stop"


def test_json_object_answers_parse_as_objects(server):
    """Any object may hold strings without end, so the test biases the tokens that close them: a model
    that always closes what it opens. The constraint must still open with "{" and write valid JSON."""
    closing = {str(first_token_id(server, char)): 100 for char in ('"', "}")}
    client = server.openai()
    for seed in SEEDS:
        text, finish_reason = chat_text(client, {}, response_format={"type": "json_object"}, logit_bias=closing,
                                        temperature=1.0, seed=seed)
        assert isinstance(json.loads(text), dict) and finish_reason == "stop"
        text, finish_reason = completion_text(client, {"response_format": {"type": "json_object"}},
                                              logit_bias=closing, temperature=1.0, seed=seed)
        assert isinstance(json.loads(text), dict) and finish_reason == "stop"


def test_chat_takes_response_format_as_the_openai_client_sends_it(server):
    client = server.openai()
    text, finish_reason = chat_text(client, {}, response_format=json_schema_format(PET_SCHEMA), seed=5)
    check_pet(text)
    assert finish_reason == "stop"


def test_every_one_of_n_choices_matches(server):
    choices = server.openai().chat.completions.create(
        model=MODEL, messages=MESSAGES, n=4, seed=3, max_tokens=MAX_TOKENS, extra_body={"guided_regex": REGEX}).choices
    assert [choice.index for choice in choices] == [0, 1, 2, 3]
    for choice in choices:
        check_regex(choice.message.content)
        assert choice.finish_reason == "stop"


def test_each_of_n_streamed_choices_is_the_whole_answers_valid_json(server):
    client = server.openai()
    request = {"model": MODEL, "messages": MESSAGES, "n": 3, "seed": 7, "temperature": 1.0, "max_tokens": MAX_TOKENS,
               "response_format": json_schema_format(PET_SCHEMA)}
    whole = client.chat.completions.create(**request).choices
    texts: dict[int, str] = {}
    for chunk in client.chat.completions.create(**request, stream=True):
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
    assert sorted(texts) == [choice.index for choice in whole] == [0, 1, 2]
    for choice in whole:
        assert texts[choice.index] == choice.message.content
        check_pet(texts[choice.index])


@pytest.mark.parametrize("name", ["response_format json_schema", "guided_regex", "structured_outputs grammar"])
def test_streamed_text_is_the_whole_answers_text(server, name):
    fields, check = CONSTRAINTS[name]
    client = server.openai()
    whole, _ = chat_text(client, fields, temperature=1.0, seed=11)
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=MAX_TOKENS, extra_body=fields,
                                            temperature=1.0, seed=11, stream=True)
    chunks = [chunk.choices[0] for chunk in stream if chunk.choices]
    assert "".join(choice.delta.content or "" for choice in chunks) == whole
    assert chunks[-1].finish_reason == "stop"
    check(whole)


@pytest.mark.parametrize("generate", [chat_text, completion_text], ids=["chat", "completions"])
def test_max_tokens_cuts_a_constrained_answer_off_with_finish_reason_length(server, generate):
    fields, _ = CONSTRAINTS["response_format json_schema"]
    text, finish_reason = generate(server.openai(), fields, max_tokens=3, temperature=0)
    assert finish_reason == "length" and text.startswith("{")


@pytest.mark.parametrize("fields, param, words", [
    ({"response_format": json_schema_format({"type": "object", "properties": {"a": {"type": "nonsense"}}})},
     "response_format.json_schema.schema", "response_format.json_schema.schema does not compile"),
    ({"response_format": json_schema_format({"type": "object", "properties": {"a": {"not": {"type": "null"}}}})},
     "response_format.json_schema.schema",
     "response_format.json_schema.schema: the schema uses 'not' (at /properties/a), which the grammar cannot enforce"),
    ({"guided_json": {"type": "string", "format": "ipv5"}}, "guided_json", "the string format 'ipv5'"),
    ({"guided_regex": "([a-z]"}, "guided_regex", "guided_regex does not compile"),
    ({"structured_outputs": {"grammar": "root ::= undefined_rule"}}, "structured_outputs.grammar",
     "structured_outputs.grammar does not compile"),
    ({"guided_json": "{oops"}, "guided_json", "guided_json is not valid JSON"),
    ({"guided_choice": []}, "guided_choice", "guided_choice must be a non-empty list"),
    ({"response_format": {"type": "json_object"}, "guided_choice": CHOICES}, "guided_choice",
     "response_format and guided_choice both constrain the output; give only one of them"),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs",
     "structured_outputs must set exactly one of"),
    ({"response_format": {"type": "json_schema"}}, "response_format",
     "json_schema must be given when type is 'json_schema'"),
    ({"response_format": {"type": "xml"}}, "response_format", "response_format.type: Input should be"),
    ({"guided_decoding_backend": "outlines", "guided_regex": REGEX}, "guided_decoding_backend",
     "guided_decoding_backend is not supported yet by this server; it accepts only null, \"auto\" or \"xgrammar\""),
])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_bad_constraints_are_400s_naming_the_field_and_the_server_keeps_serving(server, path, fields, param, words):
    base = {"messages": MESSAGES} if path == "/v1/chat/completions" else {"prompt": PROMPT}
    response = post(server, path, json={**base, **fields, "max_tokens": 4})
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == param and words in error["message"], error
    assert_still_serving(server)
