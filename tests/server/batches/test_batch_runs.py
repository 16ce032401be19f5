"""Batches through the openai SDK on a server without keys: a mixed file of 200 lines, the files routes and
their limits, a cancel and an expiry mid-way (lines held in the engine by a gate), and retention.

The batch clock is the test's own, so the 24-hour window and the retention days pass when the test says.
"""
from __future__ import annotations

import json
from collections import Counter

import openai
import pytest

from autoglm.server.batches.service import BatchService
from autoglm.server.batches.timing import BatchClock
from tests.server.batches.batch_files import (
    chat_line, completion_line, file_lines, jsonl, submit, upload, wait_for_end,
)
from tests.server.batches.engine_gate import EngineGate
from tests.server.live_server import RunningServer, start_server, wait_until
from tests.server.manual_clock import ManualClock

MAX_FILE_LINES = 250
MAX_FILE_BYTES = 64 * 1024
LINES_IN_FLIGHT = 8
DAY_S = 86_400
# The engine's priority bound: batch lines run at its far end, below every interactive request.
MAX_ABS_PRIORITY = 1000


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
def server(chat_model, clock, tmp_path_factory) -> RunningServer:
    running = start_server(chat_model, batch_clock=BatchClock(now=clock), data_dir=str(tmp_path_factory.mktemp("data")),
                           max_file_lines=MAX_FILE_LINES, max_file_bytes=MAX_FILE_BYTES,
                           batch_max_lines_in_flight=LINES_IN_FLIGHT, max_abs_priority=MAX_ABS_PRIORITY)
    yield running
    running.stop()


def service(server: RunningServer) -> BatchService:
    return server.app.state.batches


def custom_ids(lines: list[dict]) -> list[str]:
    return [line["custom_id"] for line in lines]


def test_a_mixed_file_runs_each_valid_line_once_and_answers_each_invalid_one_in_the_error_file(server, monkeypatch):
    engine = server.state.engine
    priorities = []
    generate = engine.generate

    def recording_generate(*args, priority, **kwargs):
        priorities.append(priority)
        return generate(*args, priority=priority, **kwargs)

    monkeypatch.setattr(engine, "generate", recording_generate)
    valid, lines, refused_by_line, refused_by_id = [], [], {}, {}
    for number in range(1, 201):
        custom_id = f"request-{number}"
        kind = number % 10
        if kind == 1:
            refused_by_line[number] = "invalid_json"
            lines.append('{"custom_id": "broken", "method": ')
        elif kind == 3:
            refused_by_line[number] = "duplicate_custom_id"
            lines.append(chat_line(f"request-{number - 1}"))
        elif kind == 5 and number % 20 == 5:
            refused_by_id[custom_id] = "invalid_url"
            lines.append({**chat_line(custom_id), "url": "/v1/moderations"})
        elif kind == 5:
            refused_by_id[custom_id] = "stream_unsupported"
            lines.append(chat_line(custom_id, stream=True))
        elif kind == 7 and number % 20 == 7:
            refused_by_id[custom_id] = 400
            lines.append(completion_line(custom_id, top_p=7))
        elif kind == 7:
            refused_by_line[number] = "missing_custom_id"
            lines.append({key: value for key, value in chat_line(custom_id).items() if key != "custom_id"})
        else:
            valid.append(custom_id)
            priority = {"priority": -MAX_ABS_PRIORITY} if number % 4 == 0 else {}
            lines.append(chat_line(custom_id, **priority) if number % 2 else completion_line(custom_id, **priority))
    client = server.openai()

    batch = wait_for_end(client, submit(client, lines).id)

    output, errors = file_lines(client, batch.output_file_id), file_lines(client, batch.error_file_id)
    assert batch.status == "completed"
    assert sorted(custom_ids(output)) == sorted(valid)  # each once
    assert all(line["response"]["status_code"] == 200 and line["error"] is None for line in output)
    without_id = {line["error"]["line"]: line["error"]["code"] for line in errors if line["custom_id"] is None}
    assert without_id == refused_by_line
    with_id = {line["custom_id"]: line["error"]["code"] if line["error"] else line["response"]["status_code"]
               for line in errors if line["custom_id"] is not None}
    assert with_id == refused_by_id and len(errors) == len(refused_by_line) + len(refused_by_id)
    all_ids = custom_ids(output) + [custom_id for custom_id in custom_ids(errors) if custom_id is not None]
    assert max(Counter(all_ids).values()) == 1  # a duplicate's id belongs to its first line only
    answered_400 = next(line for line in errors if line["response"] is not None)
    assert answered_400["response"]["body"]["error"]["param"] == "top_p" and answered_400["response"]["request_id"]
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (
        200, len(valid), 200 - len(valid))
    assert batch.usage.output_tokens == sum(line["response"]["body"]["usage"]["completion_tokens"] for line in output)
    assert set(priorities) == {MAX_ABS_PRIORITY}  # whatever priority a line's body asked for


def test_files_are_listed_read_and_deleted_and_bad_uploads_and_batches_are_refused_naming_the_rule(server):
    client = server.openai()
    first, second = upload(client, [chat_line("a")]), upload(client, [chat_line("b")])
    assert client.files.retrieve(first.id).bytes == len(jsonl([chat_line("a")]))
    assert json.loads(client.files.content(first.id).text) == chat_line("a")
    assert [file.id for file in client.files.list(limit=2)][:2] == [second.id, first.id]  # newest first
    assert client.files.list(after=second.id, limit=1).data[0].id == first.id
    assert client.files.delete(first.id).deleted
    with pytest.raises(openai.NotFoundError, match=f"No such File object: '{first.id}'"):
        client.files.retrieve(first.id)

    with pytest.raises(openai.BadRequestError, match="allowed: 'batch'") as refused:
        client.files.create(file=("x.jsonl", jsonl([chat_line("c")])), purpose="fine-tune")
    assert refused.value.body["param"] == "purpose"
    with pytest.raises(openai.APIStatusError, match=f"{MAX_FILE_BYTES} bytes one file may hold .setting "
                                                    f"max_file_bytes") as too_big:
        client.files.create(file=("x.jsonl", b"x" * (MAX_FILE_BYTES + 1)), purpose="batch")
    assert too_big.value.status_code == 413
    with pytest.raises(openai.APIStatusError, match=r"the request body is \d+ bytes.*\(setting max_file_bytes\)"):
        client.files.create(file=("x.jsonl", b"x" * (3 * MAX_FILE_BYTES)), purpose="batch")  # refused at the door
    with pytest.raises(openai.BadRequestError, match="the file is empty"):
        client.files.create(file=("x.jsonl", b"\n"), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="allowed: '24h'"):
        client.batches.create(input_file_id=second.id, endpoint="/v1/chat/completions", completion_window="1h")
    with pytest.raises(openai.BadRequestError, match="allowed: /v1/chat/completions, /v1/completions") as endpoint:
        client.batches.create(input_file_id=second.id, endpoint="/v1/moderations", completion_window="24h")
    assert endpoint.value.body["code"] == "invalid_url"
    with pytest.raises(openai.NotFoundError) as missing:
        client.batches.create(input_file_id=first.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert missing.value.body["param"] == "input_file_id"


def test_a_file_of_more_lines_than_max_file_lines_fails_its_batch_saying_so(server):
    client = server.openai()
    batch = wait_for_end(client, submit(client, [chat_line(f"r{number}") for number in range(MAX_FILE_LINES + 1)]).id)
    assert batch.status == "failed" and batch.errors.data[0].code == "too_many_lines"
    assert f"more than {MAX_FILE_LINES} requests" in batch.errors.data[0].message
    assert "max_file_lines" in batch.errors.data[0].message


# Lines of the batches cut short mid-way.
HELD_BATCH_LINES = 24


def held_mid_way(server: RunningServer, monkeypatch, finished_first: int) -> tuple[str, frozenset[int], EngineGate]:
    """A batch whose engine stops after `finished_first` requests, once the finished ones are recorded and the
    runner holds a full set of lines in flight: its id, those lines' numbers, and the gate that holds them."""
    gate = EngineGate(after=finished_first)
    engine = server.state.engine.engine
    monkeypatch.setattr(engine, "step", gate.wrap(engine.step))
    client = server.openai()
    batch_id = submit(client, [chat_line(f"line-{number}") for number in range(1, HELD_BATCH_LINES + 1)]).id
    runner = service(server).runner
    assert wait_until(lambda: gate.holding.is_set() and len(runner.running(batch_id)) == LINES_IN_FLIGHT
                      and client.batches.retrieve(batch_id).request_counts.completed == gate.finished)
    return batch_id, runner.running(batch_id), gate


def check_ended_mid_way(server: RunningServer, batch_id: str, in_flight: frozenset[int], gate: EngineGate,
                        status: str, code: str) -> None:
    """Once the engine goes on: the lines in flight when the batch stopped finished, no other started (lines
    start in their file's order), and the rest are in the error file with `code`."""
    client = server.openai()
    gate.open()
    batch = wait_for_end(client, batch_id)
    output, errors = file_lines(client, batch.output_file_id), file_lines(client, batch.error_file_id)
    started = gate.finished
    assert batch.status == status
    assert sorted(custom_ids(output)) == sorted(f"line-{number}" for number in range(1, started + 1))
    assert {f"line-{number}" for number in in_flight} <= set(custom_ids(output))
    assert sorted(custom_ids(errors)) == sorted(f"line-{number}" for number in range(started + 1,
                                                                                       HELD_BATCH_LINES + 1))
    assert {line["error"]["code"] for line in errors} == {code}
    assert (batch.request_counts.completed, batch.request_counts.failed) == (started, HELD_BATCH_LINES - started)


def test_a_cancelled_batch_finishes_its_lines_in_flight_and_cancels_the_rest(server, monkeypatch):
    batch_id, in_flight, gate = held_mid_way(server, monkeypatch, 5)
    cancelling = server.openai().batches.cancel(batch_id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    check_ended_mid_way(server, batch_id, in_flight, gate, "cancelled", "batch_cancelled")


def test_lines_not_done_when_the_window_ends_are_expired(server, monkeypatch, clock):
    batch_id, in_flight, gate = held_mid_way(server, monkeypatch, 3)
    clock.advance(DAY_S)
    service(server).wake()
    check_ended_mid_way(server, batch_id, in_flight, gate, "expired", "batch_expired")
    assert server.openai().batches.retrieve(batch_id).expired_at == int(clock.now)


def test_files_and_ended_batches_older_than_the_retention_are_deleted_with_their_contents(server, clock):
    client = server.openai()
    batch = wait_for_end(client, submit(client, [chat_line("kept-a-while")]).id)
    files = service(server).storage.contents
    assert files.path(batch.output_file_id).exists()
    clock.advance(29 * DAY_S)
    service(server).retention.sweep()
    assert client.batches.retrieve(batch.id).status == "completed"
    clock.advance(2 * DAY_S)
    service(server).retention.sweep()
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve(batch.id)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(batch.output_file_id)
    assert not files.path(batch.output_file_id).exists() and not files.path(batch.input_file_id).exists()
    assert client.files.list().data == [] and client.batches.list().data == []
