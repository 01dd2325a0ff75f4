"""The web UI speaks LLM: an "LLM" tab in Locust's web UI, a page of the run's own, its files,
and Prometheus text at /metrics.

When `locust -f loadtest/engines.py` runs with its web UI (not headless), install() adds, through
Locust's own extension points (the web UI's Flask app and its `extended_tabs` /
`extended_tables` template arguments, filled by `extended_stats` in each /stats/requests answer,
as Locust's examples/extend_web_ui.py does):

- the LLM tab: a table of the run's figures so far, refreshed with Locust's own tables while a
  run goes on (done/total requests or elapsed/duration with the end estimated, output tokens and
  tok/s, TTFT and ITL p50/p90/p99, failed by kind, client CPU), then the verdict, its reasons
  and warnings once the run ends;
- /llm: the same figures on a page of its own (refreshed every second, whatever Locust's state),
  with links to the run's run.json, requests.jsonl and its report;
- /llm/live.json: those figures as JSON; /llm/files/run.json, /llm/files/requests.jsonl and
  /llm/report: the current run's files (the report is built on first request, from runs.csv);
- /metrics: the same figures in Prometheus's text format (prometheus.py; docs/web-ui.md: the
  names and example queries);
- in Locust's "Download Data" tab (its `extended_csv_files` links): the run's page, run.json,
  requests.jsonl and the report, since the tab's table rows hold text only.

With Locust's --web-base-path every one of these routes follows the base path, as Locust's own do.

The figures are the run's own, from the records its row is built from (Run.records; with
--processes the master's merged records): loadtest/live/progress.py's tally, with the pooled
ITL gaps added (as the summary pools them). Each Start in the UI is a new Run, so a new tally:
the figures always speak of the run going on, or of the last one.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from loadtest.live.series import TelemetryTail, Timeline
from loadtest.live.prometheus import prometheus_text
from loadtest.live.progress import Progress, Snapshot, Tally, format_line, merge_sorted
from loadtest.results.checks import WARNINGS
from loadtest.results.record import RequestRecord
from loadtest.results.verdict import REASONS

if TYPE_CHECKING:
    from loadtest.client.run import Run

__all__ = ["ITL_BIN_MS", "Live", "LiveTally", "QUANTILES", "figures_table", "install"]

QUANTILES = (50, 90, 99)
PAGE = Path(__file__).with_name("webui_page.html")
FILES = ("run.json", "requests.jsonl")
TAB_KEY = "llm"


# ITL gaps are counted in 0.01 ms bins up to 1 s (gaps longer than that kept exactly): a read
# costs the same at a million gaps as at ten, where a sorted array (as for the TTFTs, one per
# request) would be copied at every read, tens of ms of the event loop at ten million gaps.
ITL_BIN_MS = 0.01
_ITL_BINS = 100_000


@dataclass
class LiveTally(Tally):
    """The progress line's tally plus the pooled chunk gaps (ITL) of completed requests, their
    percentiles within ITL_BIN_MS / 2 of the summary's."""
    _itl_counts: np.ndarray = field(default_factory=lambda: np.zeros(_ITL_BINS, np.int64))
    _itl_long: np.ndarray = field(default_factory=lambda: np.empty(0))  # sorted, ms, >= 1 s

    def update(self, records: Sequence[RequestRecord]) -> None:
        new = records[self._seen:]
        super().update(records)
        gaps = np.fromiter((g for r in new if r.error_kind is None for g in r.chunk_gaps_ns),
                           np.int64) / 1e6
        bins = (gaps / ITL_BIN_MS).astype(np.int64)
        short = bins < _ITL_BINS
        self._itl_counts += np.bincount(bins[short], minlength=_ITL_BINS)
        self._itl_long = merge_sorted(self._itl_long, gaps[~short].tolist())

    def itl_ms(self, q: float) -> float | None:
        """The q-th percentile, numpy's linear method, each gap read as its bin's middle."""
        cumulative = np.cumsum(self._itl_counts)
        n = int(cumulative[-1]) + len(self._itl_long)
        if not n:
            return None
        rank = q / 100 * (n - 1)
        low = math.floor(rank)
        at_low, at_high = (self._itl_at(cumulative, i) for i in (low, min(low + 1, n - 1)))
        return at_low + (at_high - at_low) * (rank - low)

    def _itl_at(self, cumulative: np.ndarray, i: int) -> float:
        """The i-th smallest gap (0-based)."""
        if i >= cumulative[-1]:
            return float(self._itl_long[i - int(cumulative[-1])])
        return (int(np.searchsorted(cumulative, i, side="right")) + 0.5) * ITL_BIN_MS


class Live:
    """One run's live figures, brought up to date at each read (a poll of the tab, the page or
    /metrics): only the records that arrived since the last read are looked at."""

    def __init__(self, run: Run, base: str = "") -> None:
        self.run = run
        self.base = base  # --web-base-path, without its trailing slash
        self._progress = Progress(run, 0.0)  # never started: its snapshot() alone is used
        self.tally = LiveTally()
        self._progress.tally = self.tally
        self.timeline = Timeline()
        self._telemetry: TelemetryTail | None = None  # once the run has its folder

    def figures(self) -> dict[str, Any]:
        """What the tab, the page and /metrics show, as JSON."""
        run = self.run
        s = _ended(self._progress.snapshot(), run.row)
        return {
            "run_id": run.run_id, "engine": run.config.engine,
            "model": run.config.model or run.info.model, "users": _users(run),
            "state": _state(run, s),
            "line": format_line(s), "unit": s.unit, "done": s.done, "total": s.total,
            "elapsed_s": s.elapsed_s, "duration_s": s.duration_s, "left_s": _left_s(s),
            "output_tokens": s.output_tokens, "output_tok_per_s": _tok_per_s(s),
            "ttft_ms": {f"p{q}": self.tally.ttft_ms(q) for q in QUANTILES},
            "itl_ms": {f"p{q}": self.tally.itl_ms(q) for q in QUANTILES},
            "failed": sum(s.errors.values()), "errors": s.errors, "cpu_pct": s.cpu_pct,
            "verdict": _verdict(run.row), "files": _links(run, self.base),
            "timeline": self._timeline(), "telemetry": self._latest_telemetry(),
            "telemetry_timeline": self._telemetry.points() if self._telemetry else [],
        }

    def _latest_telemetry(self) -> dict[str, Any] | None:
        if not self.run.run_id:
            return None
        if self._telemetry is None:
            self._telemetry = TelemetryTail(self.run.run_dir / "telemetry.jsonl")
        return self._telemetry.latest()

    def _timeline(self) -> list[dict[str, Any]]:
        """The run's intervals; while it goes on, the last ones are not settled yet."""
        self.timeline.update(self.run.records)
        return self.timeline.points(None if self.run.row is not None else time.perf_counter_ns())


def _state(run: Run, s: Snapshot) -> str:
    """ready (no Start yet), starting (users connecting), running or finished."""
    if run.row is not None:
        return "finished"
    if not run.started:
        return "ready"
    return "starting" if s.elapsed_s is None else "running"


def _ended(s: Snapshot, row: dict[str, Any] | None) -> Snapshot:
    """A finished run's snapshot stops at its end (the row's completion time), not now."""
    if row is None or row.get("completion_time_s") is None:
        return s
    return replace(s, elapsed_s=float(row["completion_time_s"]))


def _users(run: Run) -> int:
    return int(getattr(run.environment.parsed_options, "num_users", 0) or 0)


def _left_s(s: Snapshot) -> float | None:
    """The estimated time to the end: the duration's rest, or the pace so far."""
    if s.elapsed_s is None:
        return None
    if s.duration_s is not None:
        return max(s.duration_s - s.elapsed_s, 0.0)
    if s.total is None or not s.done:
        return None
    return max(s.total - s.done, 0) * s.elapsed_s / s.done


def _tok_per_s(s: Snapshot) -> float | None:
    return s.output_tokens / s.elapsed_s if s.elapsed_s else None


def _verdict(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    reasons = [n for n in str(row.get("verdict_reasons") or "").split(";") if n]
    return {"verdict": row["verdict"], "status": row.get("status", ""),
            "reasons": [{"name": n, "text": REASONS.get(n, "")} for n in reasons],
            "warnings": [{"name": n, "text": WARNINGS.get(n, "")} for n in row["warnings"]]}


def _links(run: Run, base: str) -> dict[str, str]:
    if not run.run_id:
        return {}
    links = {name: f"{base}/llm/files/{name}" for name in FILES}
    if run.row is not None:
        links["report"] = f"{base}/llm/report"
    return links


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _percentiles(values: dict[str, float | None]) -> str:
    return " · ".join(f"{name} {_ms(v)}" for name, v in values.items()) + " ms"


def figures_table(f: dict[str, Any]) -> list[dict[str, str]]:
    """The LLM tab's rows (figure, value), from figures()."""
    errors = ", ".join(f"{k} {n:,}" for k, n in sorted(f["errors"].items(), key=lambda kv: -kv[1]))
    tok_s = f["output_tok_per_s"]
    rows = [
        ("Run", f"{f['run_id'] or '(not started)'} | {f['engine']} | {f['model']} | "
                f"{f['users']} users | {f['state']}"),
        ("Progress", " | ".join(f["line"].split(" | ")[:2])),  # done/total, time and end
        ("Output tokens", f"{f['output_tokens']:,} tokens | "
                          f"{'-' if tok_s is None else f'{tok_s:,.0f}'} tok/s"),
        ("TTFT", _percentiles(f["ttft_ms"])),
        ("ITL", _percentiles(f["itl_ms"])),
        ("Failed", f"{f['failed']:,}" + (f" ({errors})" if errors else "")),
        ("Client CPU", "-" if f["cpu_pct"] is None else f"{f['cpu_pct']:.0f}%"),
        *_telemetry_rows(f.get("telemetry")),
    ]
    rows += _verdict_rows(f["verdict"])
    rows.append(("Files", "run.json, requests.jsonl and the report: links in the Download Data "
                          "tab and on this run's page, /llm"))
    return [{"figure": k, "value": v} for k, v in rows]


def _telemetry_rows(telemetry: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The latest GPU and engine samples, where the run samples them."""
    if telemetry is None:
        return []
    rows = [(f"GPU {g['gpu']}", telemetry_text(g)) for g in telemetry["gpus"]]
    if telemetry["engine"] is not None:
        rows.append(("Engine", telemetry_text(telemetry["engine"])))
    return rows


def telemetry_text(sample: dict[str, Any]) -> str:
    """One GPU's or the engine's latest sample in words (the tab's and the page's)."""
    parts = {"util_pct": "{:.0f}% busy", "mem_used_mib": "{:,.0f} MiB used",
             "power_w": "{:.0f} W", "running": "{:.0f} running", "waiting": "{:.0f} waiting",
             "kv_cache_pct": "KV cache {:.0f}%"}
    return " | ".join(form.format(sample[k]) for k, form in parts.items()
                      if sample.get(k) is not None) or "-"


def _verdict_rows(verdict: dict[str, Any] | None) -> list[tuple[str, str]]:
    if verdict is None:
        return [("Verdict", "at the end of the run")]
    rows = [("Verdict", verdict["verdict"].upper() + (f" ({verdict['status']})"
                                                      if verdict["status"] != "complete" else ""))]
    rows += [(f"Reason: {r['name']}", r["text"]) for r in verdict["reasons"]]
    rows += [(f"Warning: {w['name']}", w["text"]) for w in verdict["warnings"]]
    return rows


class _LiveOf:
    """The Live of the current run (a new one for each Start's new Run)."""

    def __init__(self, current_run: Callable[[], Run | None], base: str) -> None:
        self.current_run = current_run
        self.base = base
        self._live: Live | None = None

    def __call__(self) -> Live | None:
        run = self.current_run()
        if run is None:
            return None
        if self._live is None or self._live.run is not run:
            self._live = Live(run, self.base)
        return self._live

    def figures(self) -> dict[str, Any] | None:
        live = self()
        return None if live is None else live.figures()


def install(environment: Any, current_run: Callable[[], Run | None]) -> None:
    """The LLM tab, /llm, its JSON and files, and /metrics on `environment.web_ui` (if any)."""
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None:
        return
    base = base_path(environment)
    live = _LiveOf(current_run, base)
    web_ui.template_args.update(
        extended_tabs=[{"title": "LLM", "key": TAB_KEY}],
        extended_tables=[{"key": TAB_KEY, "structure": [{"key": "figure", "title": "Figure"},
                                                        {"key": "value", "title": "Value"}]}],
        extended_csv_files=download_links(base))
    _add_tab_stats(web_ui, live, base)
    _add_routes(web_ui, live, base)


def base_path(environment: Any) -> str:
    """Locust's --web-base-path ("/rig/" or "/rig" -> "/rig"; none -> "")."""
    options = getattr(environment, "parsed_options", None)
    return str(getattr(options, "web_base_path", "") or "").rstrip("/")


def download_links(base: str) -> list[dict[str, str]]:
    """Links in Locust's Download Data tab: its one extension point that holds links (the LLM
    tab's table renders each cell as text). They always lead to the current run's files."""
    return [{"href": f"{base}/llm", "title": "LLM: this run's page (figures, charts, verdict)"},
            {"href": f"{base}/llm/files/run.json", "title": "LLM: this run's run.json"},
            {"href": f"{base}/llm/files/requests.jsonl",
             "title": "LLM: this run's requests.jsonl (one record a request)"},
            {"href": f"{base}/llm/report", "title": "LLM: this run's report (once it has ended)"}]


def _add_tab_stats(web_ui: Any, live: _LiveOf, base: str) -> None:
    """Each /stats/requests answer (Locust's poll while a run goes on) carries the tab's rows."""
    from flask import Response, request

    @web_ui.app.after_request
    def _extend(response: Response) -> Response:
        if request.path != f"{base}/stats/requests" or response.status_code != 200:
            return response
        figures = live.figures()
        rows = figures_table(figures) if figures is not None else []
        body = response.get_json()
        body["extended_stats"] = [{"key": TAB_KEY, "data": rows}]
        response.set_data(json.dumps(body))
        return response


def _add_routes(web_ui: Any, live: _LiveOf, base: str) -> None:
    from flask import Response, jsonify, send_file

    app = web_ui.app
    guard = web_ui.auth_required_if_enabled

    @app.route(f"{base}/llm")
    @guard
    def llm_page() -> Response:
        return Response(PAGE.read_text(), mimetype="text/html")

    @app.route(f"{base}/llm/live.json")
    @guard
    def llm_live() -> Response:
        return jsonify(live.figures() or {"state": "no run"})

    @app.route(f"{base}/llm/files/<name>")
    @guard
    def llm_file(name: str) -> Response:
        current = live()
        if name not in FILES or current is None or not current.run.run_id:
            return Response("no such file of the current run\n", status=404)
        return send_file(current.run.run_dir / name, mimetype="text/plain")

    @app.route(f"{base}/llm/report")
    @guard
    def llm_report() -> Response:
        current = live()
        if current is None or current.run.row is None:
            return Response("the report comes once the run has ended\n", status=404)
        return _report(current.run)

    @app.route(f"{base}/metrics")
    @guard
    def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(prometheus_text(live.figures()), mimetype=None,
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


def _report(run: Run) -> Any:
    """The run's report (rig report of its row alone), built once into its folder."""
    from flask import Response, send_file

    out = run.run_dir / "report"
    page = out / "report.html"
    if not page.exists():
        # A process of its own: pandas and matplotlib would hold up the event loop's users.
        built = subprocess.run(
            [sys.executable, "-m", "loadtest.report", str(run.config.out),
             "--where", f"run_id={run.run_id}", "--out", str(out)],
            capture_output=True, text=True, timeout=300)
        if built.returncode != 0 or not page.exists():
            return Response(f"the report could not be built:\n{built.stderr[-2000:]}",
                            status=500, mimetype="text/plain")
    return send_file(page, mimetype="text/html")
