"""Prometheus metrics under vLLM's names, with the ``autoglm:`` prefix.

Load and token counters mirror the engine's own statistics, so they are read from its latest
snapshot at scrape time instead of being counted a second time. Latencies and finished
requests are observed by the server as requests end.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from autoglm.engine.llm_engine import EngineStats

_LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                      10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
_TOKEN_LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                            2.5, 5.0, 10.0)


class _EngineStatsCollector(Collector):
    """Gauges and counters read from the engine's latest statistics; nothing while it loads."""

    def __init__(self, model_name: str, read_stats: Callable[[], EngineStats | None]) -> None:
        self._model_name = model_name
        self._read_stats = read_stats

    def collect(self) -> Iterator[Metric]:
        stats = self._read_stats()
        if stats is None:
            return
        gauges = (
            ("autoglm:num_requests_running", "Requests in the running batch.", stats.num_running),
            ("autoglm:num_requests_waiting", "Requests waiting to be scheduled.", stats.num_waiting),
            ("autoglm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", stats.kv_cache_usage),
            ("autoglm:kv_cache_capacity_tokens", "Tokens the KV cache holds when full.",
             stats.kv_cache_capacity_tokens),
            ("autoglm:kv_cache_bytes_per_token",
             "KV cache bytes one token takes across every layer, as kv_cache_dtype stores it (scales included).",
             stats.kv_cache_bytes_per_token),
        )
        counters = (
            ("autoglm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
             stats.prefix_cache_queries),
            ("autoglm:prefix_cache_hits", "Prompt tokens found in the prefix cache.", stats.prefix_cache_hits),
            ("autoglm:num_preemptions", "Sequences preempted to free KV cache blocks.", stats.num_preemptions),
            ("autoglm:prompt_tokens", "Prompt tokens admitted.", stats.prompt_tokens_total),
            ("autoglm:generation_tokens", "Tokens generated.", stats.generation_tokens_total),
        )
        for name, documentation, value in gauges:
            gauge = GaugeMetricFamily(name, documentation, labels=["model_name"])
            gauge.add_metric([self._model_name], value)
            yield gauge
        info = GaugeMetricFamily("autoglm:cache_config_info", "The KV cache's settings, as labels.",
                                 labels=["model_name", "cache_dtype"])
        info.add_metric([self._model_name, stats.kv_cache_dtype], 1)
        yield info
        for name, documentation, value in counters:
            counter = CounterMetricFamily(name, documentation, labels=["model_name"])
            counter.add_metric([self._model_name], value)
            yield counter


# The tenant label of a request whose tenant is no longer in the tenants file (a reload removed it):
# label values are the file's tenant ids and this, never anything a client sends.
OTHER_TENANT = "other"


class ServerMetrics:
    """One registry per app, so several servers in one process never share numbers.

    `is_tenant` says whether an id is in the tenants file now, to keep the tenant label's values bounded.
    """

    def __init__(self, model_name: str, read_stats: Callable[[], EngineStats | None],
                 is_tenant: Callable[[str], bool] = lambda _: False) -> None:
        self.model_name = model_name
        self._is_tenant = is_tenant
        self.registry = CollectorRegistry()
        self.registry.register(_EngineStatsCollector(model_name, read_stats))
        self._request_success = Counter(
            "autoglm:request_success", "Requests that finished, by finish reason.",
            ["model_name", "finished_reason"], registry=self.registry,
        )
        self._tenant_request_success = Counter(
            "autoglm:tenant_request_success", "Requests that finished, by tenant and finish reason.",
            ["model_name", "tenant", "finished_reason"], registry=self.registry,
        )
        self._tenant_tokens = {
            kind: Counter(f"autoglm:tenant_{kind}_tokens", documentation, ["model_name", "tenant"],
                          registry=self.registry)
            for kind, documentation in (
                ("prompt", "Prompt tokens of the requests that ended, by tenant."),
                ("cached", "Prompt tokens found in the prefix cache, of the requests that ended, by tenant."),
                ("generation", "Tokens generated for the requests that ended, by tenant."),
            )
        }
        self._response_cache = {
            hit: Counter(f"autoglm:response_cache_{kind}", documentation, ["model_name", "version"],
                         registry=self.registry)
            for hit, kind, documentation in (
                (True, "hits", "Deterministic requests answered from the response cache, by served version."),
                (False, "misses", "Deterministic requests the response cache did not hold, by served version."),
            )
        }
        self._http_requests = Counter(
            "autoglm:http_requests", "HTTP requests answered, by route and status; 'unmatched' for unknown URLs.",
            ["route", "status"], registry=self.registry,
        )
        self.time_to_first_token = self._histogram(
            "autoglm:time_to_first_token_seconds", "Seconds from arrival to the first generated token.",
            _LATENCY_BUCKETS_S,
        )
        self.inter_token_latency = self._histogram(
            "autoglm:inter_token_latency_seconds", "Seconds between consecutive generated tokens.",
            _TOKEN_LATENCY_BUCKETS_S,
        )
        self.e2e_request_latency = self._histogram(
            "autoglm:e2e_request_latency_seconds", "Seconds from arrival to the last token.", _LATENCY_BUCKETS_S,
        )
        self.request_queue_time = self._histogram(
            "autoglm:request_queue_time_seconds", "Seconds from arrival to the first scheduled step.",
            _LATENCY_BUCKETS_S,
        )

    def _histogram(self, name: str, documentation: str, buckets: tuple[float, ...]) -> Histogram:
        histogram = Histogram(name, documentation, ["model_name"], buckets=buckets, registry=self.registry)
        return histogram.labels(self.model_name)

    def count_success(self, finished_reason: str) -> None:
        self._request_success.labels(self.model_name, finished_reason).inc()

    def count_tenant_request(self, tenant: str, finished_reason: str | None, prompt_tokens: int, cached_tokens: int,
                             generation_tokens: int) -> None:
        """A tenant's request that ended: a success if it has a finish reason, its tokens in any case."""
        label = tenant if self._is_tenant(tenant) else OTHER_TENANT
        if finished_reason is not None:
            self._tenant_request_success.labels(self.model_name, label, finished_reason).inc()
        for kind, tokens in (("prompt", prompt_tokens), ("cached", cached_tokens), ("generation", generation_tokens)):
            self._tenant_tokens[kind].labels(self.model_name, label).inc(tokens)

    def count_response_cache(self, version: str, hit: bool) -> None:
        self._response_cache[hit].labels(self.model_name, version).inc()

    def count_http_request(self, route: str, status: int) -> None:
        self._http_requests.labels(route, str(int(status))).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of everything above (media type CONTENT_TYPE_LATEST)."""
        return generate_latest(self.registry)
