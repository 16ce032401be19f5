from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.server.live_server import make_chat_model, start_server
from tests.server.tenants_files import TenantsFixture, bearer

_SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}


@pytest.fixture(scope="module")
def exported_metric_names(tmp_path_factory) -> set[str]:
    """Every sample name a live server's /metrics holds or declares, once it has served a tenant's request twice
    (with tenants and a response cache configured, so that their counters have series): a counter as NAME_total,
    a histogram as NAME_bucket, NAME_sum and NAME_count, whether or not a series has been counted yet (no
    request failed, yet the version error counter exists)."""
    folder = tmp_path_factory.mktemp("exported-metrics")
    tenants = TenantsFixture(tenants=[{"id": "team"}])
    key = tenants.add_key("team-key", "team")
    server = start_server(make_chat_model(folder / "model"), tenants_file=str(tenants.write(folder / "tenants.yaml")),
                          response_cache="memory")
    try:
        for _ in range(2):  # a response cache miss, then a hit
            body = {"prompt": "Hello world", "max_tokens": 4, "temperature": 0}
            httpx.post(server.url + "/v1/completions", json=body, headers=bearer(key), timeout=60).raise_for_status()
        text = httpx.get(server.url + "/metrics", timeout=10).text
    finally:
        server.stop()
    families = list(text_string_to_metric_families(text))
    declared = {family.name + suffix for family in families for suffix in _SAMPLE_SUFFIXES.get(family.type, ("",))}
    return declared | {sample.name for family in families for sample in family.samples}
