"""Settings the tiers cannot work with are refused at start, naming what is wrong and what is allowed."""
from __future__ import annotations

import pytest

from tests.engine.kv_tiers.scenario import block_bytes, make_llm


@pytest.mark.parametrize(("settings", "message"), [
    ({"kv_disk_path": "blocks"}, "kv_disk_path needs kv_offload_bytes above 0"),
    ({"kv_offload_bytes": "1MiB", "enable_prefix_caching": False}, "needs enable_prefix_caching"),
    ({"kv_offload_bytes": 100}, "kv_offload_bytes of 100 bytes holds no block; one block needs"),
    ({"kv_offload_bytes": "1MiB", "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}},
     "speculative method 'mtp' keeps KV of its own"),
    ({"kv_offload_bytes": "1MiB", "kv_disk_path": "blocks", "kv_disk_bytes": 100},
     "kv_disk_bytes of 100 bytes holds no block file"),
])
def test_settings_the_tiers_cannot_work_with_are_refused(model_dir, tmp_path, monkeypatch, settings, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message):
        make_llm(model_dir, **settings)


def test_the_start_log_names_each_tier_and_its_size(model_dir, tmp_path, caplog):
    with caplog.at_level("INFO", logger="autoglm"):
        make_llm(model_dir, kv_offload_bytes=8 * block_bytes(model_dir), kv_disk_path=str(tmp_path),
                 kv_disk_bytes="1MiB")
    line = next(record.getMessage() for record in caplog.records if record.getMessage().startswith("KV tiers:"))
    assert "host memory of 8 blocks (0.02 MiB, a mapped file)" in line
    assert f"then disk at {tmp_path} capped at 1.00 MiB" in line
