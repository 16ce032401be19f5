"""Batches on a server with keys: a tenant reaches only its own files and batches, its storage quota holds,
and its lines run as its own requests, within its token quota, as they run.

The rate limits' windows and a line's wait for its Retry-After are on the test's clock: a wait moves the
clock on by as long as it asks, at once.
"""
from __future__ import annotations

import httpx
import openai
import pytest
from openai import OpenAI

from autoglm.server.batches.timing import BatchClock
from autoglm.server.tenants.rate_limits import LimitWindows
from tests.server.batches.batch_files import chat_line, completion_line, file_lines, submit, upload, wait_for_end
from tests.server.live_server import RunningServer
from tests.server.manual_clock import ManualClock
from tests.server.tenants_files import TenantsFixture, serve_tenants

STORAGE_QUOTA = 4096
# Enough for two of the metered lines in a minute (each its prompt and 40 tokens), never three.
METERED_TOKENS_PER_MINUTE = 100
METERED_MAX_TOKENS = 40


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    tenants = TenantsFixture(tenants=[
        {"id": "alpha"}, {"id": "beta"}, {"id": "hoarder"},
        {"id": "metered", "limits": {"tokens_per_minute": METERED_TOKENS_PER_MINUTE}},
    ])
    for tenant in ("alpha", "beta", "hoarder", "metered"):
        tenants.add_key(tenant, tenant)
    tenants.add_key("alpha-reader", "alpha", role="reader")
    return tenants


@pytest.fixture(scope="module")
def waits() -> list[float]:
    """The Retry-After waits of batch lines, in order."""
    return []


@pytest.fixture(scope="module")
def server(chat_model, tenants, waits, tmp_path_factory) -> RunningServer:
    clock = ManualClock()

    async def wait_on_the_clock(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)

    folder = tmp_path_factory.mktemp("tenants")
    running = serve_tenants(chat_model, tenants, folder, data_dir=str(folder / "data"),
                            limit_windows=LimitWindows(clock=clock), batch_clock=BatchClock(sleep=wait_on_the_clock),
                            tenant_storage_bytes=STORAGE_QUOTA, batch_max_lines_in_flight=1)
    yield running
    running.stop()


def client_of(server: RunningServer, tenants: TenantsFixture, key: str) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key=tenants.keys[key], max_retries=0, timeout=60)


def not_found_message(call) -> str:
    with pytest.raises(openai.NotFoundError) as missing:
        call()
    return missing.value.body["message"]


def test_a_tenant_reaches_none_of_anothers_files_and_batches(server, tenants):
    alpha, beta = client_of(server, tenants, "alpha"), client_of(server, tenants, "beta")
    batch = wait_for_end(alpha, submit(alpha, [chat_line("alphas")]).id)
    assert batch.status == "completed"
    unknown_file, unknown_batch = "file-" + "0" * 24, "batch_" + "0" * 32
    file_id = batch.input_file_id

    assert not_found_message(lambda: beta.files.retrieve(file_id)) == f"No such File object: '{file_id}'"
    assert not_found_message(lambda: beta.files.retrieve(unknown_file)) == f"No such File object: '{unknown_file}'"
    assert not_found_message(lambda: beta.files.content(batch.output_file_id)).startswith("No such File object")
    assert not_found_message(lambda: beta.files.delete(file_id)).startswith("No such File object")
    assert not_found_message(lambda: beta.batches.retrieve(batch.id)) == f"No such Batch object: '{batch.id}'"
    assert not_found_message(lambda: beta.batches.retrieve(unknown_batch)) == f"No such Batch object: '{unknown_batch}'"
    assert not_found_message(lambda: beta.batches.cancel(batch.id)).startswith("No such Batch object")
    assert not_found_message(lambda: beta.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                                         completion_window="24h")).startswith("No such File object")
    assert beta.files.list().data == [] and beta.batches.list().data == []
    assert {file.id for file in alpha.files.list()} == {file_id, batch.output_file_id}
    assert alpha.files.retrieve(file_id).id == file_id  # still there, for its own tenant
    refused = httpx.get(server.url + f"/v1/files/{file_id}", timeout=10)
    assert refused.status_code == 401


def test_a_key_that_may_not_generate_reads_its_tenants_files_but_changes_none(server, tenants):
    reader = client_of(server, tenants, "alpha-reader")
    assert reader.files.list().data  # alpha's files, from the test above or its own
    with pytest.raises(openai.PermissionDeniedError, match="role 'reader' may read"):
        upload(reader, [chat_line("x")])


def test_an_upload_past_the_tenants_storage_quota_is_413_naming_the_quota_and_what_it_holds(server, tenants):
    hoarder = client_of(server, tenants, "hoarder")
    file_bytes = 1500
    kept = [hoarder.files.create(file=("f.jsonl", b"x" * file_bytes), purpose="batch") for _ in range(2)]
    with pytest.raises(openai.APIStatusError) as full:
        hoarder.files.create(file=("f.jsonl", b"x" * file_bytes), purpose="batch")
    assert full.value.status_code == 413 and full.value.body["code"] == "storage_quota_exceeded"
    assert (f"tenant 'hoarder' already holds {2 * file_bytes} bytes" in full.value.body["message"]
            and f"storage quota of {STORAGE_QUOTA} bytes (setting tenant_storage_bytes)" in full.value.body["message"])
    hoarder.files.delete(kept[0].id)
    assert hoarder.files.create(file=("f.jsonl", b"x" * file_bytes), purpose="batch").bytes == file_bytes


def test_lines_past_the_tenants_token_quota_wait_for_the_next_window_and_one_past_a_whole_window_fails(
        server, tenants, waits):
    metered = client_of(server, tenants, "metered")
    lines = [completion_line(f"metered-{number}", max_tokens=METERED_MAX_TOKENS, ignore_eos=True)
             for number in range(6)]
    lines.append(completion_line("too-big", max_tokens=2 * METERED_TOKENS_PER_MINUTE))
    batch = wait_for_end(metered, submit(metered, lines).id)
    assert batch.status == "completed"
    assert (batch.request_counts.completed, batch.request_counts.failed) == (6, 1)
    assert waits == [60.0, 60.0]  # two lines a minute: three windows, two waits for the next
    (too_big,) = file_lines(metered, batch.error_file_id)
    assert too_big["custom_id"] == "too-big" and too_big["response"]["status_code"] == 400
    assert "tokens_per_minute" in too_big["response"]["body"]["error"]["message"]
    with pytest.raises(openai.RateLimitError):  # the last window's tokens went to the batch's last two lines
        metered.completions.create(model=server.state.model_name, prompt="Hello", max_tokens=METERED_MAX_TOKENS)
