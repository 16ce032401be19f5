"""The pooling routes on live servers: OpenAI's client embeds (floats and base64), rerank and score answer in
their shapes and equal the offline engine, and every bad input is a 400 in OpenAI's error shape."""
from __future__ import annotations

import base64

import httpx
import numpy
import pytest
import torch

from autoglm import LLM
from tests.pooling.checkpoints import make_classifier_checkpoint, make_embedding_checkpoint
from tests.server.batches.batch_files import file_lines, upload, wait_for_end
from tests.server.live_server import start_server

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello world!", "To be, or not to be"]
QUERY = "What does the fox jump over?"
SETTINGS = {"max_context_len": 64, "matryoshka_dimensions": "16", "max_pooling_inputs": 8}


@pytest.fixture(scope="module")
def embedding_dir(tmp_path_factory):
    return make_embedding_checkpoint(tmp_path_factory.mktemp("embedding"))


@pytest.fixture(scope="module")
def embedding_server(embedding_dir):
    running = start_server(embedding_dir, served_model_name="tiny-embed", **SETTINGS)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def reranker_server(tmp_path_factory):
    running = start_server(make_classifier_checkpoint("qwen2", tmp_path_factory.mktemp("reranker")),
                           served_model_name="tiny-rerank", max_context_len=64)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def offline(embedding_dir):
    return LLM(str(embedding_dir), dtype="float32", max_context_len=64, kv_cache_memory="1MiB")


def error_of(response: httpx.Response) -> dict:
    return response.json()["error"]


def test_the_openai_client_embeds_in_floats_and_base64(embedding_server, offline):
    client = embedding_server.openai()
    floats = client.embeddings.create(model="tiny-embed", input=TEXTS, encoding_format="float")
    packed = client.embeddings.create(model="tiny-embed", input=TEXTS, encoding_format="base64")
    decoded_by_client = client.embeddings.create(model="tiny-embed", input=TEXTS)  # asks for base64, decodes it
    expected = offline.embed(TEXTS, use_tqdm=False)
    assert [item.index for item in floats.data] == [0, 1, 2] and floats.model == "tiny-embed"
    for as_floats, as_base64, decoded, reference in zip(floats.data, packed.data, decoded_by_client.data, expected,
                                                        strict=True):
        assert torch.allclose(torch.tensor(as_floats.embedding), torch.tensor(reference.embedding), atol=1e-5)
        little_endian = numpy.frombuffer(base64.b64decode(as_base64.embedding), dtype="<f4")
        assert little_endian.tolist() == pytest.approx(as_floats.embedding, abs=1e-7)
        assert decoded.embedding == pytest.approx(as_floats.embedding, abs=1e-7)
    tokens = sum(len(output.prompt_token_ids) for output in expected)
    assert floats.usage.prompt_tokens == floats.usage.total_tokens == tokens
    by_ids = client.embeddings.create(model="tiny-embed", input=[expected[0].prompt_token_ids], dimensions=16)
    assert len(by_ids.data[0].embedding) == 16
    engine = embedding_server.state.engine.engine
    assert not engine.requests and engine.block_manager.num_referenced_blocks() == 0


def test_score_and_rerank_of_an_embedding_model_are_cosines(embedding_server, offline):
    vectors = [torch.tensor(output.embedding) for output in offline.embed([QUERY, *TEXTS], use_tqdm=False)]
    cosines = [float(torch.nn.functional.cosine_similarity(vectors[0], vector, dim=0)) for vector in vectors[1:]]
    scored = httpx.post(embedding_server.url + "/v1/score", json={"text_1": QUERY, "text_2": TEXTS}).json()
    assert [item["score"] for item in scored["data"]] == pytest.approx(cosines, abs=1e-5)
    ranked = httpx.post(embedding_server.url + "/rerank", json={"query": QUERY, "documents": TEXTS, "top_n": 2}).json()
    best = sorted(range(3), key=lambda index: -cosines[index])[:2]
    assert [result["index"] for result in ranked["results"]] == best
    assert ranked["results"][0]["document"] == {"text": TEXTS[best[0]]}


def test_rerank_and_score_of_a_sequence_classifier(reranker_server):
    documents = [TEXTS[0], {"text": TEXTS[1]}, TEXTS[2]]
    ranked = httpx.post(reranker_server.url + "/v1/rerank",
                        json={"query": QUERY, "documents": documents, "return_documents": False}).json()
    scored = httpx.post(reranker_server.url + "/score", json={"text_1": [QUERY] * 3, "text_2": TEXTS}).json()
    scores = [item["score"] for item in scored["data"]]
    assert sorted(result["index"] for result in ranked["results"]) == [0, 1, 2]
    assert all("document" not in result for result in ranked["results"])
    for result in ranked["results"]:
        assert result["relevance_score"] == pytest.approx(scores[result["index"]], abs=1e-6)
    assert [result["relevance_score"] for result in ranked["results"]] == sorted(scores, reverse=True)
    v2 = httpx.post(reranker_server.url + "/v2/rerank", json={"query": QUERY, "documents": TEXTS, "top_n": 1}).json()
    assert len(v2["results"]) == 1 and v2["usage"]["prompt_tokens"] > 0


@pytest.mark.parametrize(("route", "body", "phrase"), [
    ("/v1/embeddings", {"input": []}, "no input"),
    ("/v1/embeddings", {"input": ""}, "empty"),
    ("/v1/embeddings", {"input": ["a"] * 9}, "max_pooling_inputs"),
    ("/v1/embeddings", {"input": list(range(3, 80))}, "maximum context length"),
    ("/v1/embeddings", {"input": "Hello", "dimensions": 8}, "dimensions must be one of 16"),
    ("/v1/embeddings", {"input": "Hello", "encoding_format": "hex"}, "encoding_format"),
    ("/v1/embeddings", {"input": "Hello", "dimensions": 0}, "dimensions must be a whole number of at least 1"),
    ("/v1/embeddings", {"input": "Hello", "truncate_prompt_tokens": 0}, "truncate_prompt_tokens must be -1"),
    ("/v1/embeddings", {"input": "Hello", "colour": 1}, "colour"),
    ("/v1/embeddings", {"input": "Hello", "model": "other"}, "other"),
    ("/v1/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}, "text_1 has 2"),
    ("/v1/rerank", {"query": "a", "documents": ["b"], "top_n": 0}, "top_n"),
    ("/v1/rerank", {"query": "a", "documents": []}, "no input"),
])
def test_bad_input_is_a_400_naming_it(embedding_server, route, body, phrase):
    response = httpx.post(embedding_server.url + route, json=body)
    assert response.status_code in (400, 404), response.text
    assert phrase in error_of(response)["message"], error_of(response)


def test_a_batch_of_embedding_lines(embedding_server, offline):
    client = embedding_server.openai()
    lines = [{"custom_id": f"line-{index}", "method": "POST", "url": "/v1/embeddings",
              "body": {"model": "tiny-embed", "input": text}} for index, text in enumerate(TEXTS)]
    batch = client.batches.create(input_file_id=upload(client, lines).id, endpoint="/v1/embeddings",
                                  completion_window="24h")
    ended = wait_for_end(client, batch.id)
    assert ended.status == "completed" and ended.request_counts.completed == len(TEXTS)
    answers = {line["custom_id"]: line["response"]["body"] for line in file_lines(client, ended.output_file_id)}
    for index, reference in enumerate(offline.embed(TEXTS, use_tqdm=False)):
        assert answers[f"line-{index}"]["data"][0]["embedding"] == pytest.approx(reference.embedding, abs=1e-5)


def test_truncation_instead_of_refusal(embedding_server, offline):
    prompt = list(range(3, 80))
    answer = httpx.post(embedding_server.url + "/v1/embeddings",
                        json={"input": prompt, "truncate_prompt_tokens": 20}).json()
    expected = offline.embed(prompt[-20:], use_tqdm=False)[0].embedding
    assert answer["usage"]["prompt_tokens"] == 20
    assert answer["data"][0]["embedding"] == pytest.approx(expected, abs=1e-5)


def test_a_generation_model_refuses_embeddings_naming_the_models_that_pool(server):
    response = httpx.post(server.url + "/v1/embeddings", json={"input": "Hello"})
    assert response.status_code == 400
    assert "does not pool" in error_of(response)["message"] and "*ForSequenceClassification" in \
        error_of(response)["message"]
    rerank = httpx.post(server.url + "/v1/rerank", json={"query": "a", "documents": ["b"]})
    assert rerank.status_code == 400 and "does not pool" in error_of(rerank)["message"]


def test_models_say_what_each_model_serves(embedding_server, reranker_server, server):
    assert httpx.get(embedding_server.url + "/v1/models").json()["data"][0]["tasks"] == ["embed"]
    assert httpx.get(reranker_server.url + "/v1/models").json()["data"][0]["tasks"] == ["classify", "score"]
    assert httpx.get(server.url + "/v1/models").json()["data"][0]["tasks"] == ["generate"]


def test_a_pooling_model_refuses_generation(embedding_server):
    response = httpx.post(embedding_server.url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 2})
    assert response.status_code == 400
    assert "does not generate" in error_of(response)["message"]
