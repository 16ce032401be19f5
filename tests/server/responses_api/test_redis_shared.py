"""Two servers sharing one Redis store (responses_store: redis://...), as Ray's replicas do: a response one
stored, the other reads back, continues through previous_response_id and deletes."""
from __future__ import annotations

import openai
import pytest

from tests.server.redis_server import running_redis
from tests.server.responses_api.conftest import MODEL, start_scripted

pytestmark = pytest.mark.timeout(60)


def test_two_servers_share_stored_responses(glm45_model, glm45_tokenizer, tmp_path):
    with running_redis(tmp_path) as redis_server:
        replicas = [start_scripted(glm45_model, glm45_tokenizer, responses_store=redis_server.url,
                                   data_dir=str(tmp_path / f"data-{index}")) for index in range(2)]
        try:
            first, second = replicas
            first.answer("Hello from the first.")
            second.answer("Hello from the second.")
            kept = first.server.openai().responses.create(model=MODEL, input="Hi")
            other = second.server.openai()
            assert other.responses.retrieve(kept.id) == kept
            continued = other.responses.create(model=MODEL, input="Again", previous_response_id=kept.id)
            assert second.last_prompt() == second.rendered([
                {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello from the first."},
                {"role": "user", "content": "Again"}])
            other.responses.delete(kept.id)
            with pytest.raises(openai.NotFoundError):
                first.server.openai().responses.retrieve(kept.id)
            assert first.server.openai().responses.retrieve(continued.id).output_text == "Hello from the second."
        finally:
            for replica in replicas:
                replica.server.stop()
    assert not any((tmp_path / f"data-{index}").exists() for index in range(2))  # nothing kept on their disks
