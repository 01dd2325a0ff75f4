"""The run's live figures (loadtest/live/webui.py's figures()) in Prometheus's text exposition
format, served at /metrics: the names and example queries are in docs/web-ui.md."""

from __future__ import annotations

from typing import Any

__all__ = ["prometheus_text"]


def prometheus_text(f: dict[str, Any] | None) -> bytes:
    """The figures in Prometheus's text exposition format (docs/web-ui.md)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    if f is not None and f["run_id"]:  # nothing before the first Start
        registry.register(_Collector(f))
    return generate_latest(registry)


class _Collector:
    """One scrape's metrics, labelled with the run they describe."""

    def __init__(self, figures: dict[str, Any]) -> None:
        self.f = figures

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> list[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        f = self.f
        names = ["run_id", "engine", "model", "users"]
        labels = [f["run_id"], f["engine"], f["model"], str(f["users"])]

        def gauge(name: str, doc: str, value: float | None) -> list[Any]:
            if value is None:
                return []
            metric = GaugeMetricFamily(f"llm_rig_{name}", doc, labels=names)
            metric.add_metric(labels, value)
            return [metric]

        def counter(name: str, doc: str, value: float) -> Any:
            metric = CounterMetricFamily(f"llm_rig_{name}", doc, labels=names)
            metric.add_metric(labels, value)
            return metric

        out = [counter(f"{f['unit']}_done", f"{f['unit']} finished, failed ones included",
                       f["done"]),
               counter("output_tokens", "output tokens of completed requests",
                       f["output_tokens"]),
               _errors(f, names, labels), *_quantiles(f, names, labels)]
        out += gauge(f"{f['unit']}_planned", "the fixed workload's total", f["total"])
        out += gauge("elapsed_seconds", "since dispatch opened", f["elapsed_s"])
        out += gauge("duration_seconds", "a time-bounded run's sending time", f["duration_s"])
        out += gauge("estimated_remaining_seconds", "until the end, at the pace so far",
                     f["left_s"])
        out += gauge("output_tokens_per_second", "output tokens per second since dispatch opened",
                     f["output_tok_per_s"])
        out += gauge("client_cpu_percent", "the load generator's CPU (busiest process)",
                     f["cpu_pct"])
        out += gauge("run_finished", "1 once the run has ended", float(f["state"] == "finished"))
        return out + _verdict_metric(f, names, labels)


def _errors(f: dict[str, Any], names: list[str], labels: list[str]) -> Any:
    from prometheus_client.core import CounterMetricFamily

    metric = CounterMetricFamily("llm_rig_failed_requests", "failed requests by error_kind",
                                 labels=[*names, "kind"])
    for kind, n in sorted(f["errors"].items()):
        metric.add_metric([*labels, kind], n)
    return metric


def _quantiles(f: dict[str, Any], names: list[str], labels: list[str]) -> list[Any]:
    from prometheus_client.core import GaugeMetricFamily

    out = []
    for key, name, doc in (("ttft_ms", "ttft_seconds", "time to first token so far"),
                           ("itl_ms", "itl_seconds", "inter-token latency (pooled gaps) so far")):
        metric = GaugeMetricFamily(f"llm_rig_{name}", doc, labels=[*names, "quantile"])
        for q, value in f[key].items():
            if value is not None:
                metric.add_metric([*labels, f"{int(q[1:]) / 100:g}"], value / 1000)
        out.append(metric)
    return out


def _verdict_metric(f: dict[str, Any], names: list[str], labels: list[str]) -> list[Any]:
    from prometheus_client.core import GaugeMetricFamily

    if f["verdict"] is None:
        return []
    metric = GaugeMetricFamily("llm_rig_run_valid", "1: the run's verdict is valid, 0: invalid",
                               labels=names)
    metric.add_metric(labels, float(f["verdict"]["verdict"] == "valid"))
    warnings = GaugeMetricFamily("llm_rig_run_warnings", "the run's warnings", labels=names)
    warnings.add_metric(labels, len(f["verdict"]["warnings"]))
    return [metric, warnings]
