"""instructor's patched openai client in its two modes that reach a server's structured output: TOOLS (a
forced function call) and JSON_SCHEMA (response_format json_schema)."""
from __future__ import annotations

import jsonschema
import pytest

from tests.clients.replies import MODEL, PROMPT, STRUCTURED_MAX_TOKENS, Weather
from tests.optional_packages import import_client, needs_xgrammar

instructor = import_client("instructor", "instructor")

pytestmark = [pytest.mark.timeout(120), needs_xgrammar]


@pytest.mark.parametrize("mode", ["TOOLS", "JSON_SCHEMA"])
def test_response_model_comes_back_valid(client_server, mode):
    client = instructor.from_openai(client_server.openai(), mode=instructor.Mode[mode])
    weather, completion = client.chat.completions.create_with_completion(
        model=MODEL, response_model=Weather, messages=[{"role": "user", "content": PROMPT}],
        max_tokens=STRUCTURED_MAX_TOKENS, temperature=0, max_retries=1)  # one attempt: no retry may hide a failure
    assert isinstance(weather, Weather)
    jsonschema.validate(weather.model_dump(), Weather.model_json_schema())
    message = completion.choices[0].message
    if mode == "TOOLS":  # the object came from the forced call's arguments, not from text
        (call,) = message.tool_calls
        assert call.function.name == "Weather" and message.content is None
        assert Weather.model_validate_json(call.function.arguments).model_dump() == weather.model_dump()
    else:
        assert message.tool_calls is None
        assert Weather.model_validate_json(message.content).model_dump() == weather.model_dump()
