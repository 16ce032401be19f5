"""text.format's json_schema through the official openai client's responses.parse, on the tiny random model with
real weights: its output is noise but for the grammar, so that the parsed answer shows the schema was enforced."""
from __future__ import annotations

import json

import pytest

from tests.clients.replies import STRUCTURED_MAX_TOKENS, Weather
from tests.optional_packages import needs_xgrammar

pytestmark = [pytest.mark.timeout(120), needs_xgrammar]


def test_a_json_schema_answer_validates(server):
    client = server.openai()
    parsed = client.responses.parse(model="tiny-llama", input="The weather in Paris?", text_format=Weather,
                                    max_output_tokens=STRUCTURED_MAX_TOKENS, temperature=0, store=False)
    assert parsed.status == "completed" and isinstance(parsed.output_parsed, Weather)
    assert parsed.text.format.type == "json_schema" and parsed.text.format.strict is True
    assert Weather.model_validate(json.loads(parsed.output_text)) == parsed.output_parsed
