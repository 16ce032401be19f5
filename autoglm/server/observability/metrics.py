"""Prometheus metrics under vLLM's names, with the ``autoglm:`` prefix.

Load and token counters mirror the engines' own statistics, so they are read from their latest
snapshots at scrape time instead of being counted a second time (labelled by the served version
each engine runs). Latencies and finished requests are observed by the server as requests end;
each model version's requests, errors, tokens and time to first token also under labels model
and version.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from autoglm.engine.kv_offload.tier_stats import RESTORE_LATENCY_BUCKETS_S, TierStats
from autoglm.engine.stats import EngineStats
from autoglm.engine.speculative.metrics import SpecDecodeStats
from autoglm.server.versions.version_ids import split_version_id

_LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                      10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
_TOKEN_LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                            2.5, 5.0, 10.0)


# Each loaded engine's latest statistics, by the served version id it runs (empty while none has loaded).
StatsReader = Callable[[], dict[str, EngineStats]]


class _EngineStatsCollector(Collector):
    """Gauges and counters read from each engine's latest statistics, model_name being its served version."""

    def __init__(self, read_stats: StatsReader) -> None:
        self._read_stats = read_stats

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for served, stats in self._read_stats().items():
            for family in self._collect_one(served, stats):
                if family.name in families:
                    families[family.name].samples.extend(family.samples)
                else:
                    families[family.name] = family
        yield from families.values()

    @staticmethod
    def _collect_one(served: str, stats: EngineStats) -> Iterator[Metric]:
        gauges = (
            ("autoglm:num_requests_running", "Requests in the running batch.", stats.num_running),
            ("autoglm:num_requests_waiting", "Requests waiting to be scheduled.", stats.num_waiting),
            ("autoglm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", stats.kv_cache_usage),
            ("autoglm:kv_cache_capacity_tokens", "Tokens the KV cache holds when full.",
             stats.kv_cache_capacity_tokens),
            ("autoglm:kv_cache_bytes_per_token",
             "KV cache bytes one token takes across every layer, as kv_cache_dtype stores it (scales included).",
             stats.kv_cache_bytes_per_token),
            ("autoglm:tensor_parallel_size", "Processes the model is split across (1: no tensor parallelism).",
             stats.tensor_parallel_size),
        )
        counters = (
            ("autoglm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
             stats.prefix_cache_queries),
            ("autoglm:prefix_cache_hits", "Prompt tokens found in the prefix cache.", stats.prefix_cache_hits),
            ("autoglm:num_preemptions", "Sequences preempted to free KV cache blocks.", stats.num_preemptions),
            ("autoglm:prompt_tokens", "Prompt tokens admitted.", stats.prompt_tokens_total),
            ("autoglm:generation_tokens", "Tokens generated.", stats.generation_tokens_total),
            ("autoglm:num_failed_steps", "Engine steps that raised; only the requests that caused them end.",
             stats.num_failed_steps),
        )
        for name, documentation, value in gauges:
            gauge = GaugeMetricFamily(name, documentation, labels=["model_name"])
            gauge.add_metric([served], value)
            yield gauge
        info = GaugeMetricFamily("autoglm:cache_config_info", "The KV cache's settings, as labels.",
                                 labels=["model_name", "cache_dtype"])
        info.add_metric([served, stats.kv_cache_dtype], 1)
        yield info
        for name, documentation, value in counters:
            counter = CounterMetricFamily(name, documentation, labels=["model_name"])
            counter.add_metric([served], value)
            yield counter
        if stats.spec_decode is not None:
            yield from _EngineStatsCollector._spec_decode(served, stats.spec_decode)
        if stats.kv_tiers:
            yield from _EngineStatsCollector._kv_tiers(served, stats.kv_tiers)

    @staticmethod
    def _spec_decode(served: str, spec: SpecDecodeStats) -> Iterator[Metric]:
        """vLLM's spec_decode counters: acceptance rate is accepted over draft tokens, by position too."""
        for name, documentation, value in (
            ("autoglm:spec_decode_num_drafts", "Sequences' proposals verified by the target.", spec.num_drafts),
            ("autoglm:spec_decode_num_draft_tokens", "Tokens proposed.", spec.num_draft_tokens),
            ("autoglm:spec_decode_num_accepted_tokens", "Proposed tokens the target kept.", spec.num_accepted_tokens),
        ):
            counter = CounterMetricFamily(name, documentation, labels=["model_name"])
            counter.add_metric([served], value)
            yield counter
        per_position = CounterMetricFamily("autoglm:spec_decode_num_accepted_tokens_per_pos",
                                           "Proposed tokens the target kept, by position in their draft.",
                                           labels=["model_name", "position"])
        for position, value in enumerate(spec.accepted_per_position):
            per_position.add_metric([served, str(position)], value)
        yield per_position

    @staticmethod
    def _kv_tiers(served: str, tiers: list[TierStats]) -> Iterator[Metric]:
        """Each KV tier below the pool (host, disk): its blocks found and missed, bytes held and moved, restore time."""
        labels = ["model_name", "tier"]
        for kind, name, documentation, read in (
            (CounterMetricFamily, "autoglm:kv_tier_hits", "Blocks a prefix lookup restored from the tier.",
             lambda tier: tier.hits),
            (CounterMetricFamily, "autoglm:kv_tier_misses",
             "Admitted prefix lookups that reached the tier and did not find their next block there.",
             lambda tier: tier.misses),
            (GaugeMetricFamily, "autoglm:kv_tier_stored_bytes", "Bytes of blocks the tier holds.",
             lambda tier: tier.bytes_stored),
            (CounterMetricFamily, "autoglm:kv_tier_written_bytes", "Bytes written to the tier.",
             lambda tier: tier.bytes_written),
            (CounterMetricFamily, "autoglm:kv_tier_read_bytes", "Bytes read back from the tier.",
             lambda tier: tier.bytes_read),
            (CounterMetricFamily, "autoglm:kv_tier_dropped_blocks",
             "Block files refused on read (corrupt, truncated or foreign) and recomputed.",
             lambda tier: tier.blocks_dropped),
        ):
            family = kind(name, documentation, labels=labels)
            for tier in tiers:
                family.add_metric([served, tier.tier], read(tier))
            yield family
        latency = HistogramMetricFamily(
            "autoglm:kv_tier_restore_seconds",
            "Seconds to bring blocks back from the tier: a step's copies from host memory, one block's file from disk.",
            labels=labels)
        for tier in tiers:
            histogram = tier.restore_latency
            cumulative = [sum(histogram.counts[: index + 1]) for index in range(len(histogram.counts))]
            bounds = [str(bound) for bound in RESTORE_LATENCY_BUCKETS_S] + ["+Inf"]
            latency.add_metric([served, tier.tier], list(zip(bounds, cumulative)), histogram.sum_s)
        yield latency


# The tenant label of a request whose tenant is no longer in the tenants file (a reload removed it):
# label values are the file's tenant ids and this, never anything a client sends.
OTHER_TENANT = "other"


class ServerMetrics:
    """One registry per app, so several servers in one process never share numbers.

    `is_tenant` says whether an id is in the tenants file now, to keep the tenant label's values bounded.
    """

    def __init__(self, model_name: str, read_stats: StatsReader,
                 is_tenant: Callable[[str], bool] = lambda _: False) -> None:
        self.model_name = model_name
        self._is_tenant = is_tenant
        self.registry = CollectorRegistry()
        self.registry.register(_EngineStatsCollector(read_stats))
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
            hit: Counter(f"autoglm:response_cache_{kind}", documentation, ["model", "version"],
                         registry=self.registry)
            for hit, kind, documentation in (
                (True, "hits", "Deterministic requests answered from the response cache, by served version."),
                (False, "misses", "Deterministic requests the response cache did not hold, by served version."),
            )
        }
        self._malformed_tool_calls = Counter(
            "autoglm:malformed_tool_calls", "Tool calls the model wrote wrong under tool_choice 'auto' (left open, "
            "an undeclared tool, arguments their schema refuses), by the format they were read in.",
            ["model_name", "parser"], registry=self.registry,
        )
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

        version_labels = ["model", "version"]
        self._version_requests = Counter("autoglm:model_version_requests",
                                         "Requests a model version took in, counted as they end.", version_labels,
                                         registry=self.registry)
        self._version_errors = Counter("autoglm:model_version_errors",
                                       "Requests a model version failed (a 5xx answer or error event).",
                                       version_labels, registry=self.registry)
        self._version_tokens = {
            kind: Counter(f"autoglm:model_version_{kind}_tokens", documentation, version_labels,
                          registry=self.registry)
            for kind, documentation in (("prompt", "Prompt tokens of a model version's requests that ended."),
                                        ("generation", "Tokens a model version generated, for requests that ended."))
        }
        self._version_time_to_first_token = Histogram(
            "autoglm:model_version_time_to_first_token_seconds",
            "Seconds from arrival to the first generated token, by model version.", version_labels,
            buckets=_LATENCY_BUCKETS_S, registry=self.registry,
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

    def count_version_request(self, model: str, version: str, failed: bool, prompt_tokens: int,
                              generation_tokens: int, time_to_first_token_s: float | None) -> None:
        """A request a model version took in has ended (`version` is empty on a server without a registry)."""
        self._version_requests.labels(model, version).inc()
        if failed:
            self._version_errors.labels(model, version).inc()
        self._version_tokens["prompt"].labels(model, version).inc(prompt_tokens)
        self._version_tokens["generation"].labels(model, version).inc(generation_tokens)
        if time_to_first_token_s is not None:
            self._version_time_to_first_token.labels(model, version).observe(time_to_first_token_s)

    def count_response_cache(self, version_id: str, hit: bool) -> None:
        """A deterministic request looked up in the response cache, labelled as the version counters are."""
        model, version = split_version_id(version_id)
        self._response_cache[hit].labels(model, version).inc()

    def count_malformed_tool_call(self, parser: str) -> None:
        self._malformed_tool_calls.labels(self.model_name, parser).inc()

    def count_http_request(self, route: str, status: int) -> None:
        self._http_requests.labels(route, str(int(status))).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of everything above (media type CONTENT_TYPE_LATEST)."""
        return generate_latest(self.registry)
