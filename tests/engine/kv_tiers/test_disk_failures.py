"""A disk tier that cannot be written stops offloading with one warning while serving goes on, and the size cap
holds with two engines writing into one folder."""
from __future__ import annotations

import errno
import logging
import os
import subprocess

from autoglm.runner.kv_tiers import disk_store
from autoglm.runner.kv_tiers.disk_store import TRIM_TO
from tests.engine.kv_tiers.scenario import (OTHER_PROMPTS, SECOND_TURN, first_turn_then_other_work, run_alone, tier,
                                            tiered_llm)


def disk_warnings(caplog) -> list[logging.LogRecord]:
    return [record for record in caplog.records if "cannot be written" in record.getMessage()]


def test_an_unwritable_folder_warns_once_and_serving_goes_on(model_dir, tmp_path, caplog):
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    with caplog.at_level(logging.WARNING, logger="autoglm"):
        engine = tiered_llm(model_dir, host_blocks=4, disk_path=not_a_folder / "blocks").engine
        first_turn_then_other_work(engine)
        _, num_cached = run_alone(engine, SECOND_TURN)
    assert len(disk_warnings(caplog)) == 1
    assert num_cached == 0 and tier(engine, "disk").bytes_written == 0


def test_a_full_disk_warns_once_and_serving_goes_on(model_dir, tmp_path, caplog, monkeypatch):
    def disk_full(source, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(disk_store.os, "replace", disk_full)
    folder = tmp_path / "blocks"
    with caplog.at_level(logging.WARNING, logger="autoglm"):
        engine = tiered_llm(model_dir, host_blocks=4, disk_path=folder).engine
        first_turn_then_other_work(engine)
        run_alone(engine, SECOND_TURN)
    assert len(disk_warnings(caplog)) == 1
    assert list(folder.iterdir()) == []  # no temporary file left behind


def test_the_size_cap_holds_with_two_engines_writing(model_dir, tmp_path):
    folder = tmp_path / "blocks"
    engines = [tiered_llm(model_dir, host_blocks=4, disk_path=folder, disk_blocks=6).engine for _ in range(2)]
    first, second = (engine.kv_offload.disk.staging for engine in engines)
    assert first != second  # one engine's close never removes what the other staged
    for round_ in range(2):
        for index, engine in enumerate(engines):
            for prompt in OTHER_PROMPTS[:2]:
                run_alone(engine, [token + round_ + 7 * index for token in prompt])
    cap = engines[0].config.cache.kv_disk_bytes
    assert all(tier(engine, "disk").bytes_written > cap for engine in engines)  # each wrote past the cap alone
    stored = sum(path.stat().st_size for path in folder.iterdir())
    assert TRIM_TO * cap / 2 < stored <= cap  # the least recently used files went, not all of them


def test_staging_folders_of_ended_engines_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is free now, and no live process of this test's can reuse it before the check
    ended, live = (tmp_path / disk_store.staging_folder_name(pid, 0) for pid in (dead.pid, os.getpid()))
    for folder in (ended, live):
        folder.mkdir()
        (folder / "0-00").write_bytes(b"staged")
    disk_store.remove_stale_staging(tmp_path)
    assert not ended.exists() and live.exists()


def test_a_folder_without_hard_links_misses_with_one_warning_and_serving_goes_on(model_dir, tmp_path, caplog,
                                                                                  monkeypatch):
    def no_links(source, target):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    folder = tmp_path / "blocks"
    writer = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    first_turn_then_other_work(writer)
    writer.close()
    monkeypatch.setattr(disk_store.os, "link", no_links)
    reader = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    with caplog.at_level(logging.WARNING, logger="autoglm"):
        _, num_cached = run_alone(reader, SECOND_TURN)
        key = reader.kv_offload.disk.key(b"any block")
        reader.kv_offload.disk.write(key, b"a payload")
        assert not reader.kv_offload.disk.stage(key, sequence=1)  # a second file that cannot be staged
    assert num_cached == 0 and tier(reader, "disk").hits == 0
    assert len([record for record in caplog.records if "cannot stage" in record.getMessage()]) == 1
