"""The Grafana dashboard queries only metrics the server exports (checked against a live server's /metrics),
and shows what an operator of the servers needs; the HPA's metric exists too."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deploy.deploy_files import adapter_rules, dashboard
from tests.deploy.promql import label_values_metric, metric_names

# What the dashboard must show, by the metric that shows it.
SHOWN = {
    "request rate by finish reason": "autoglm:request_success_total",
    "answers and errors by status": "autoglm:http_requests_total",
    "time to first token percentiles": "autoglm:time_to_first_token_seconds_bucket",
    "inter-token latency percentiles": "autoglm:inter_token_latency_seconds_bucket",
    "end-to-end latency percentiles": "autoglm:e2e_request_latency_seconds_bucket",
    "prompt throughput": "autoglm:prompt_tokens_total",
    "generation throughput": "autoglm:generation_tokens_total",
    "running requests": "autoglm:num_requests_running",
    "waiting requests": "autoglm:num_requests_waiting",
    "KV cache usage": "autoglm:kv_cache_usage_perc",
    "prefix cache hits": "autoglm:prefix_cache_hits_total",
    "prefix cache lookups": "autoglm:prefix_cache_queries_total",
    "preemptions": "autoglm:num_preemptions_total",
    "requests per model version": "autoglm:model_version_requests_total",
    "errors per model version": "autoglm:model_version_errors_total",
    "time to first token per model version": "autoglm:model_version_time_to_first_token_seconds_bucket",
    "response cache hits": "autoglm:response_cache_hits_total",
    "response cache misses": "autoglm:response_cache_misses_total",
    "requests per tenant": "autoglm:tenant_request_success_total",
    "tokens per tenant": "autoglm:tenant_generation_tokens_total",
}


def panel_expressions() -> Iterator[tuple[str, str]]:
    """(panel title, PromQL expression) of every query of every panel, rows' nested panels included."""
    def walk(panels: list[dict]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            yield from ((panel["title"], target["expr"]) for target in panel.get("targets", []))
            yield from walk(panel.get("panels", []))

    yield from walk(dashboard()["panels"])


def test_metric_names_are_found_in_an_expression() -> None:
    expression = ('histogram_quantile(0.99, sum by (le, model_name) (rate(autoglm:x_bucket{model=~"$model"}'
                  '[$__rate_interval]))) / on(pod) group_left autoglm:y > bool 1e3')
    assert metric_names(expression) == {"autoglm:x_bucket", "autoglm:y"}


def test_every_panel_queries_only_metrics_the_server_exports(exported_metric_names) -> None:
    expressions = list(panel_expressions())
    assert expressions
    for title, expression in expressions:
        names = metric_names(expression)
        assert names, f"panel {title!r} queries no metric: {expression}"
        assert names <= exported_metric_names, f"panel {title!r} queries {names - exported_metric_names}"


def test_every_variable_lists_labels_of_an_exported_metric(exported_metric_names) -> None:
    queries = [variable["query"]["query"] for variable in dashboard()["templating"]["list"]
               if variable["type"] == "query"]
    assert {label_values_metric(query) for query in queries} <= exported_metric_names


def test_the_dashboard_shows_what_operators_need() -> None:
    queried = {name for _, expression in panel_expressions() for name in metric_names(expression)}
    assert {what: metric for what, metric in SHOWN.items() if metric not in queried} == {}


def test_the_metric_the_hpa_scales_on_is_exported(exported_metric_names) -> None:
    for rule in adapter_rules():
        assert metric_names(rule["seriesQuery"]) <= exported_metric_names
        assert metric_names(rule["metricsQuery"].replace("<<.Series>>", "series")) == {"series"}


@pytest.mark.parametrize("panel", [panel for panel in dashboard()["panels"] if panel["type"] != "row"],
                         ids=lambda panel: panel["title"])
def test_every_panel_reads_the_chosen_prometheus(panel: dict) -> None:
    assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert panel["description"] and panel["targets"]
