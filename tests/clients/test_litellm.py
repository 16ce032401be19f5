"""litellm's completion() on an OpenAI-compatible server (model "openai/NAME" with api_base), plain and
streamed, reads the same greedy reply the official openai client gets."""
from __future__ import annotations

import pytest

from tests.clients.replies import GREEDY, MODEL, PROMPT, openai_reply
from tests.optional_packages import import_client

# litellm declares its TypedDicts in a way pydantic warns about on each first use; nothing of ours.
pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier")]


@pytest.fixture(scope="module")
def litellm():
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # its price list from the package, not the web
        yield import_client("litellm", "litellm")


def complete(litellm, server, **fields: object):
    return litellm.completion(model=f"openai/{MODEL}", api_base=server.url + "/v1", api_key="unused",
                              messages=[{"role": "user", "content": PROMPT}], num_retries=0, **GREEDY, **fields)


def test_completion_reads_the_reply_the_openai_client_gets(litellm, client_server):
    reply, expected = complete(litellm, client_server), openai_reply(client_server)
    assert reply.choices[0].message.content == expected.choices[0].message.content
    assert reply.choices[0].finish_reason == expected.choices[0].finish_reason
    assert reply.usage.completion_tokens == expected.usage.completion_tokens


def test_streamed_completion_joins_to_the_same_reply(litellm, client_server):
    chunks = list(complete(litellm, client_server, stream=True))
    assert len(chunks) > 2
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert text == openai_reply(client_server).choices[0].message.content
