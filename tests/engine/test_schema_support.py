import json

import pytest

from autoglm.engine.structured_output.schema_support import ENFORCED_FORMATS, MAX_SCHEMA_DEPTH, check_enforceable
from autoglm.errors import InvalidRequestError

FIELD = "structured_outputs.json"


@pytest.mark.parametrize("schema, words", [
    ({"type": "integer", "not": {"const": 1}}, "uses 'not' (at /)"),
    ({"type": "object", "properties": {"a": {"type": "integer", "if": {"minimum": 5}}}}, "'if' (at /properties/a)"),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, "'dependentRequired'"),
    ({"type": "object", "dependencies": {"a": ["b"]}}, "'dependencies'"),
    ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 5}}, "'contains'"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "'uniqueItems'"),
    ({"allOf": [{"type": "integer"}, {"maximum": 3}]}, "'allOf' with 2 schemas"),
    ({"type": "string", "format": "ipv5"}, "the string format 'ipv5'"),
    ({"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}, "refers to 'https://example.com"),
    ({"$defs": {"x": {"$anchor": "x", "type": "integer"}}, "properties": {"a": {"$ref": "#x"}}}, "refers to '#x'"),
    ({"anyOf": [{"type": "string"}, {"type": "array", "items": [{"not": {}}]}]}, "'not' (at /anyOf/1/items/0)"),
    ({"$defs": {"deep": {"oneOf": [{"type": "null"}, {"else": {}}]}}}, "'else' (at /$defs/deep/oneOf/1)"),
    ({"type": "string", "maxLength": 10**12}, "sets 'maxLength' to 1000000000000 (at /); it must be a whole number"),
    ({"type": "array", "items": {"type": "string", "minLength": -1}}, "sets 'minLength' to -1 (at /items)"),
    ({"type": "object", "maxProperties": 1.5}, "sets 'maxProperties' to 1.5"),
])
def test_keywords_the_grammar_ignores_are_refused_where_they_stand(schema, words):
    with pytest.raises(InvalidRequestError, match="^structured_outputs.json: the schema ") as caught:
        check_enforceable(schema, FIELD)
    assert words in str(caught.value) and caught.value.param == FIELD


@pytest.mark.parametrize("schema", [
    # Property names and data that look like keywords are neither.
    {"type": "object", "properties": {"not": {"type": "string"}, "if": {"enum": ["then", "else"]}},
     "required": ["not"]},
    {"type": "string", "enum": [{"not": 1}], "default": {"contains": 2}},
    {"type": "array", "uniqueItems": False, "items": {"allOf": [{"type": "integer"}]}},
    {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#"},
    {"type": "string", "format": "date-time"},
    True,
])
def test_schemas_the_grammar_enforces_pass(schema):
    check_enforceable(schema, FIELD)


def test_too_deep_a_schema_is_refused_without_recursing():
    schema: dict = {"type": "integer"}
    for _ in range(MAX_SCHEMA_DEPTH + 1):
        schema = {"type": "array", "items": schema}
    with pytest.raises(InvalidRequestError, match=f"nests schemas deeper than {MAX_SCHEMA_DEPTH} levels"):
        check_enforceable(schema, FIELD)
    for _ in range(5000):  # far past Python's recursion limit: still a clear refusal
        schema = {"type": "array", "items": schema}
    with pytest.raises(InvalidRequestError, match="deeper than"):
        check_enforceable(schema, FIELD)


@pytest.mark.parametrize("string_format", ENFORCED_FORMATS)
def test_the_formats_called_enforced_are_enforced(string_format):
    """If an xgrammar upgrade changes which formats it checks, this says the list must follow."""
    xgrammar = pytest.importorskip("xgrammar")
    grammar = xgrammar.Grammar.from_json_schema(json.dumps({"type": "string", "format": string_format}),
                                                any_whitespace=False)
    assert not xgrammar.testing._is_grammar_accept_string(grammar, '"!! not {} anything ~~"')
