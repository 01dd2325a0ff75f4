"""The report engineers read, from results files (the command: loadtest/report/cli.py).

The sections are heats: one workload (by workload_sha256, named by `workload`) at one user count,
each with every engine and configuration that ran it; nothing is compared across heats. Curves
across user counts (race.png, users.png, frontier.png) are drawn once, and only where some
configuration ran more than one user count. Engines that served one model under different names
are one model (by its digest, see runset.py); runs of different models are reported apart.
Where a workload was run by more than one engine (or with --race), the report opens with the
race (loadtest/report/race.py): one table of every heat naming its fastest engine, and race.png;
with --race, stdout prints only the race.
Where runs know their GPU count, the report opens with the frontier by GPU
(loadtest/report/frontier.py): output tok/s per GPU against tok/s per user, per model and
request shape, the undominated configurations listed with their cost and energy per million
tokens, and what a --target picks; with --frontier, stdout prints only that.
Open-loop runs (--rate) get their own section (loadtest/report/goodput.py): one line per
offered rate with latency from the schedule and from the send, the knee and, with --slo, the
highest rate at which --slo-share percent (default 99) of requests met the targets; goodput is
plotted against rate and users; runs that kept their outputs are compared with the baseline's.
"""

from __future__ import annotations

import base64
import html
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from loadtest.results.checks import WARNINGS
from loadtest.report.answer_table import MODEL_TEXT, answer_runs, answers_markdown
from loadtest.report.cost import GpuPrices
from loadtest.report.frontier import (GROUP, frontier_cells, frontier_markdown, group_label,
                                      left_out_markdown, measure_runs, target_lines)
from loadtest.report.target import Bound
from loadtest.report.goodput import (equivalence_table, is_open_loop, open_loop_markdown,
                                     plot_goodput, rate_table)
from loadtest.results.goodput import DEFAULT_SLO_SHARE_PCT
from loadtest.report.engine_processes import (engine_process_cells, engine_process_rows,
                                              engine_processes_markdown, front_end_cells)
from loadtest.report.options import shown_options
from loadtest.report.gpus import gpu_cells, gpus_markdown, per_gpu_rows, plot_gpus
from loadtest.report.groups import groups_section
from loadtest.report.timeslices import timed_runs_section
from loadtest.report.traffic import answers_section, reasoning_section
from loadtest.report.plots import (
    config_label,
    curves,
    plot_distributions,
    plot_frontier,
    plot_frontier_by_gpu,
    plot_race,
    plot_timeline,
    plot_users,
)
from loadtest.report.race import (
    invalid_markdown,
    race_cells,
    race_markdown,
    split_invalid,
    winner_line,
    winners,
)
from loadtest.report.runset import (
    CONFIG,
    HEAT,
    MODEL,
    heat_label,
    load_runs,
    model_label,
    read_requests,
    read_telemetry,
    run_files,
    select_runs,
)
from loadtest.report.tables import (
    SATURATED_CPU_PCT,
    cell_table,
    comparison_markdown,
    flag_effects,
    flag_effects_markdown,
    heat_cells,
    markdown_table,
)

__all__ = ["Report", "build_report", "report_folder"]

_MAX_DISTRIBUTION_RUNS = 60


@dataclass
class Report:
    """The report as blocks, rendered to Markdown and to HTML from the same content."""
    out: Path
    blocks: list[tuple[str, str]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)  # comparison tables, for stdout
    races: list[str] = field(default_factory=list)  # race tables and their winners, for stdout
    frontiers: list[str] = field(default_factory=list)  # the frontier by GPU, for stdout
    targets: list[str] = field(default_factory=list)  # what --target picks, for stdout
    said: set[str] = field(default_factory=set)  # explanations given once, not in every heat

    def once(self, text: str) -> None:
        """A paragraph that explains a kind of section: said at its first occurrence only."""
        if text not in self.said:
            self.said.add(text)
            self.text(text)

    def heading(self, level: int, text: str) -> None:
        self.blocks.append((f"h{level}", text))

    def text(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, markdown: str) -> None:
        self.blocks.append(("table", markdown))

    def image(self, path: Path, alt: str) -> None:
        if path.exists():
            self.blocks.append(("img", f"{path.relative_to(self.out)}\n{alt}"))

    def markdown(self) -> str:
        parts = []
        for kind, content in self.blocks:
            if kind.startswith("h"):
                parts.append("#" * int(kind[1]) + " " + content)
            elif kind == "img":
                src, alt = content.split("\n", 1)
                parts.append(f"![{alt}]({src})")
            else:
                parts.append(content)
        return "\n\n".join(parts) + "\n"

    def html(self) -> str:
        body = [_html_block(kind, content, self.out) for kind, content in self.blocks]
        return _HTML_PAGE.format(body="\n".join(body))


def report_folder(root: Path, out: Path, *, where: list[str], failed: dict[str, str],
                  baseline: str | None, race: bool, slo_share: float,
                  source: Path | None = None, frontier: bool = False,
                  prices: GpuPrices | None = None, target: tuple[Bound, ...] = ()) -> int:
    """The report of the runs under `root` written to `out`, its tables printed; 2 with one
    `error:` line for a runs.csv or --where that cannot be read. `source`: what the report
    says it was made from, where that is not `root` (an export laid out in a temporary one)."""
    source = source or root
    try:
        loaded = load_runs(root)
        runs = select_runs(loaded, where)
    except (KeyError, ValueError) as exc:
        # one line, whatever the user typed into the option it quotes
        message = str(exc.args[0]).replace("\r", "\\r").replace("\n", "\\n")
        print(f"error: {message}", file=sys.stderr)
        return 2
    if runs.empty:
        reason = "no matching runs" if where else "no runs.csv rows"
        message = f"nothing to report: {reason} under {source} (a complete, non-warm-up run adds one)"
        if failed:
            message += "; did not run: " + "; ".join(f"{e} ({why})" for e, why in failed.items())
        print(message)
        _write(_empty_report(out, message))
        return 0
    report = build_report(runs, out, baseline=baseline, source=source, race=race, failed=failed,
                          slo_share=slo_share, prices=prices, target=target,
                          answered=answer_runs(loaded))
    _write(report)
    if frontier:
        printed = report.frontiers or ["no frontier by GPU: no closed-loop run here records "
                                       "its GPU count (--gpu or GPU telemetry)"]
    else:
        printed = report.races if race else report.races + report.tables
    print("\n\n".join(printed + (["\n".join(report.targets)] if report.targets else [])))
    print(f"\nreport: {out / 'report.md'} and {out / 'report.html'}", file=sys.stderr)
    return 0


def build_report(runs: pd.DataFrame, out: Path, baseline: str | None = None,
                 source: Path | None = None, race: bool = False,
                 failed: dict[str, str] | None = None,
                 slo_share: float = DEFAULT_SLO_SHARE_PCT, prices: GpuPrices | None = None,
                 target: tuple[Bound, ...] = (), answered: pd.DataFrame | None = None) -> Report:
    """The report's sections: per model, the race and the curves across user counts (drawn
    once), then one section per heat with every engine in it; then the answers side by side
    (`answered`: answer_table.answer_runs), open loop and warnings."""
    report = Report(out)
    everything, open_loop = runs, runs[is_open_loop(runs)]
    runs = runs[~is_open_loop(runs)]  # closed loop: the cells below are engine x users
    models = list(runs.groupby(MODEL, sort=False, dropna=False))
    report.heading(1, "llm-load-rig report")
    report.text(f"{len(everything)} run{'' if len(everything) == 1 else 's'} of "
                f"{', '.join(sorted(everything['engine'].unique()))}"
                f"{f' from `{source}`' if source else ''}, "
                f"{everything['timestamp'].min()} to {everything['timestamp'].max()}; "
                f"written {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}.")
    report.text("A heat is one workload at one user count: every engine in it ran the same "
                "requests, and nothing is compared across heats. Each cell is one engine, "
                "options (flags), gpu and user count; `±` is the sample standard deviation over "
                "its repeats (none with one run). Latency percentiles are the mean of each run's "
                "own percentile, computed from its raw requests.")
    if len(models) > 1:
        report.text(f"**Not comparable as a whole:** these runs served {len(models)} models ("
                    + "; ".join(model_label(m) for _, m in models) + "). Each model is reported "
                    "on its own; nothing is ranked across models.")
    _client_section(report, everything)
    _frontier_section(report, runs, prices, target)
    for number, (_, model) in enumerate(models, start=1):
        suffix = "" if number == 1 else f"-m{number}"
        about = f" ({model_label(model)})" if len(models) > 1 else ""
        _race_section(report, model, race, failed or {}, suffix, about)
        _curves_section(report, model, suffix, about)
        heats = sorted(model.groupby(HEAT, sort=False, dropna=False), key=_heat_order)
        several_shas = len({sha for (_, sha, _), _ in heats}) > len(
            {str(h["workload"].iloc[0]) for _, h in heats})
        for index, (_, heat) in enumerate(heats, start=1):
            _heat_section(report, heat, f"{suffix}-h{index}", about, baseline, several_shas)
        _timeline_section(report, model, about)
        _runs_section(report, model, about, prices)
    if answered is not None:
        _answers_section(report, answered)
    _open_loop_section(report, everything, open_loop, slo_share)
    _equivalence_section(report, everything, baseline)
    timed_runs_section(report, everything)
    groups_section(report, everything)
    reasoning_section(report, everything)
    answers_section(report, everything)
    _warnings_section(report, everything)
    return report


def _answers_section(report: Report, answered: pd.DataFrame) -> None:
    """Each engine's answers to the same prompts, side by side (loadtest/report/answer_table.py)."""
    table = answers_markdown(answered)
    if not table:
        return
    report.heading(2, "Answers: the same prompts, each engine's answer")
    names = dict.fromkeys(Path(str(name)).name for name in answered["model"].unique())  # a path or an alias
    served = ", ".join(f"`{name}`" for name in names)
    report.text(f"A different model from the speed heats (a tiny model of random weights: its "
                f"answers are noise): here {served}; the race's answers leg serves {MODEL_TEXT}. "
                "One user, greedy, each "
                "answer stopping where the model stopped; ✓/✗: the task's one right answer or "
                "not (loadtest/workload/answers.py). Answers shortened; the whole text is in each "
                "run's outputs.jsonl.")
    report.table(table)
    report.races.append(f"Answers (SmolLM2-135M-Instruct, not the race's model)\n{table}")


def _open_loop_section(report: Report, runs: pd.DataFrame, open_loop: pd.DataFrame,
                       share: float) -> None:
    """Open-loop runs by offered rate, and goodput against rate and users."""
    table = rate_table(open_loop) if not open_loop.empty else pd.DataFrame()
    if not table.empty:
        report.heading(2, "Open loop: offered rate")
        report.text("Each line: one configuration, --users cap and offered rate (repeats "
                    "averaged). Latency \"from schedule\" counts from the time the request was due, "
                    "so waiting for the cap or a late client counts (coordinated omission); \"from "
                    "send\" from when it left. Send lag p99: actual send - scheduled (the verdict's "
                    "behind_schedule above 50 ms). Cap full: requests that found every user busy. "
                    "Knee: the smallest rate achieving within 5% of the best req/s; saturated: "
                    "achieved below 90% of offered.")
        markdown, lines = open_loop_markdown(table, share)
        report.table(markdown)
        report.text("\n".join(f"- {line}" for line in lines))
        report.tables.append("Open loop: offered rate\n" + markdown + "\n" + "\n".join(lines))
    path = report.out / "goodput.png"
    report.out.mkdir(parents=True, exist_ok=True)
    if "goodput_req_per_s" in runs and plot_goodput(runs, table, path):
        report.heading(3, "Goodput against rate and users")
        report.text("Goodput: requests per second that met every --slo target (solid); achieved "
                    "req/s (dashed); offered (grey).")
        report.image(path, "goodput against offered rate and users")


def _equivalence_section(report: Report, runs: pd.DataFrame, baseline: str | None) -> None:
    title, table = equivalence_table(runs, baseline)
    if not table:
        return
    report.heading(2, "Output equivalence")
    report.text(f"{title} Runs that kept their outputs (--keep-outputs) on the same prompts, "
                "request by request: identical answers, and where they differ the position of "
                "the first differing token (median and earliest). Under greedy decoding a "
                "configuration that must not change answers (speculative decoding, scheduling "
                "flags) should match 100%; one that does (quantization, a shorter length) shows "
                "by how much, beside its speed.")
    report.table(table)
    report.tables.append("Output equivalence\n" + title + "\n" + table)


def _frontier_section(report: Report, runs: pd.DataFrame, prices: GpuPrices | None,
                      target: tuple[Bound, ...]) -> None:
    """The frontier by GPU, per model and request shape, where any closed-loop run knows its
    GPU count; the runs left out, named; what --target picks."""
    measured = measure_runs(runs, prices) if not runs.empty else runs
    if measured.empty or measured["gpus"].isna().all():
        if target:
            report.targets.append(f"target {','.join(map(str, target))}: nothing to judge (no "
                                  "closed-loop run here records its GPU count)")
        return
    cells = frontier_cells(measured)
    report.heading(2, "Frontier by GPU: throughput per GPU against speed per user")
    report.text("Each valid run at (output tok/s per user, output tok/s per GPU): per user is "
                "1000 / its mean TPOT (the decode rate a user sees after the first token), per "
                "GPU its output tok/s over its GPUs (the --gpu indices, else a one-GPU host's "
                "telemetry). A point is a configuration at one user count, the mean of its "
                "repeats; one on the frontier is beaten on both by no other point of its model "
                "and request shape (its workloads differing only in request count); nothing is "
                "compared across models or shapes. Cost: the GPUs' hourly price over the output "
                "tokens of an hour at that rate; energy: the measured J per output token / 3.6 "
                "(docs/report.md).")
    printed = []
    for number, (key, group) in enumerate(
            (cells.groupby(GROUP, sort=False) if not cells.empty else []), start=1):
        model_runs = measured[measured[GROUP[0]] == key[0]]
        label = group_label(group, model_label(model_runs))
        report.heading(3, label)
        chosen = None
        if target:
            shown = shown_options(group["flags"])
            lines, chosen = target_lines(measured, group, target, label, shown, every_miss=True)
            report.text("\n".join(f"- {line.strip()}" for line in lines))
            report.targets.extend(target_lines(measured, group, target, label, shown)[0])
        path = report.out / f"frontier-gpu-{number}.png"
        plot_frontier_by_gpu(group, path, label, chosen)
        report.image(path, "output tok/s per GPU against output tok/s per user")
        table = frontier_markdown(group, priced=prices is not None)
        others = int((~group["on_frontier"]).sum())
        report.text(f"On the frontier ({len(group) - others} of {len(group)} configurations "
                    f"at their user counts; the other {others} are beaten on both):")
        report.table(table)
        printed.append(f"Frontier by GPU: {label}\n{table}")
    left = measured[measured["left_out"] != ""]
    if not left.empty:
        report.heading(3, "Runs left out of the frontier")
        table = left_out_markdown(measured)
        report.table(table)
        printed.append(f"Runs left out of the frontier\n{table}")
    if prices is None:
        report.text("Dollars per million tokens need a price: --gpu-hour-price or --gpu-prices.")
    report.frontiers.extend(printed)


def _client_section(report: Report, runs: pd.DataFrame) -> None:
    cpu = pd.to_numeric(runs.get("client_cpu_max_pct"), errors="coerce")
    if cpu is None or cpu.isna().all():
        report.text("Client CPU: not recorded for these runs.")
        return
    saturated = runs[cpu > SATURATED_CPU_PCT]
    if saturated.empty:
        report.text(f"Client CPU: no load-generator process went above {SATURATED_CPU_PCT:.0f}% "
                    f"of a core (highest peak {cpu.max():.0f}%), so client timestamps are "
                    "not delayed by the client.")
        return
    names = ", ".join(f"`{r}`" for r in saturated["run_id"])
    report.text(f"**Client saturated** in {len(saturated)} run(s) (a load-generator process "
                f"above {SATURATED_CPU_PCT:.0f}% of a core; their latencies may include client "
                f"delay; add --processes): {names}.")


def _race_section(report: Report, runs: pd.DataFrame, force: bool, failed: dict[str, str],
                  suffix: str = "", about: str = "") -> None:
    """The race, when a workload was run by more than one engine (always when `force`): one
    table of every heat, and the engines' curves across user counts drawn once (race.png)."""
    if not force and runs.groupby("workload_sha256")["engine"].nunique().max() < 2:
        return
    valid, invalid = split_invalid(runs)
    cells = race_cells(runs)
    leaders = winners(cells, invalid, failed)
    workloads = runs.drop_duplicates("workload_sha256")
    several = len(workloads) > 1
    names = ", ".join(f"`{w['workload']}` (sha256 {str(w['workload_sha256'])[:12] or '?'}, "
                      f"{_users_list(runs[runs['workload_sha256'] == w['workload_sha256']])})"
                      for _, w in workloads.iterrows())
    report.heading(2, f"Race: the fastest engine at each user count{about}")
    report.text(f"Engines race in heats: one workload at one user count, the same requests for "
                f"every engine; nothing is compared across heats. Workload{'s' if several else ''}: "
                f"{names}. The fastest in a heat has the highest mean output tok/s; it is called "
                "only when it leads the next by more than both repeat spreads added (else \"not "
                "significant\"), and \"single run\" marks a lead with no spread to judge it by. "
                "Runs with failed requests or an invalid verdict are never ranked, and a heat "
                "with fewer than two engines ranked has no winner (\"undecided\").")
    notes = _race_notes(valid)
    if notes:
        report.text(notes)
    table = race_markdown(cells, failed)
    lines = [winner_line(w, with_workload=several) for w in leaders.values()]
    heats = set(zip(invalid["workload_sha256"], invalid["users"])) - set(leaders)
    workload_of = dict(zip(invalid["workload_sha256"], invalid["workload"]))
    lines += [f"no valid run at {users:g} user{'s' if users != 1 else ''}"
              f"{f' ({workload_of[sha]})' if several else ''}: see the invalid runs below"
              for sha, users in sorted(heats, key=lambda heat: (heat[1], str(workload_of[heat[0]])))]
    lines += [f"{engine} did not run: {why}" for engine, why in failed.items()]
    report.table(table)
    if lines:
        report.text("\n".join(f"- {line}" for line in lines))
    if runs["users"].nunique() > 1:  # one user count: one point per engine, no curve
        path = report.out / f"race{suffix}.png"
        stars = {heat: w.name for heat, w in leaders.items() if w.significant and w.decided}
        plot_race(cells, stars, path, "Output tok/s against users (star: fastest in its heat)",
                  invalid)
        report.image(path, "output tok/s against users, one line per engine")
    printed = f"Race: the fastest engine at each user count\n{table}" + "".join(
        f"\n{line}" for line in lines)
    if not invalid.empty:
        report.heading(3, "Invalid runs (shown apart, never ranked)")
        invalid_table = invalid_markdown(invalid)
        report.table(invalid_table)
        printed += f"\n\nInvalid runs (never ranked)\n{invalid_table}"
    report.races.append(printed)


def _users_list(runs: pd.DataFrame) -> str:
    values = sorted(set(runs["users"].dropna()))
    return f"{', '.join(f'{v:g}' for v in values)} user{'s' if values != [1] else ''}"


def _race_notes(runs: pd.DataFrame, columns: tuple[str, ...] = ("model", "output_tokens_source"),
                ) -> str:
    """What differs between the engines beyond the engine itself: the names they served the
    model under, where output tokens were counted from."""
    notes = []
    for column, what in (("model", "served the model as"),
                         ("output_tokens_source", "counted output tokens from")):
        if column not in columns:
            continue
        if column in runs and runs[column].nunique() > 1:
            pairs = runs.drop_duplicates(["engine", column])
            notes.append(f"{what} " + ", ".join(f"`{r[column]}` ({r['engine']})"
                                               for _, r in pairs.iterrows()))
    return ("The engines " + "; ".join(notes) + ".") if notes else ""


def _heat_order(item: tuple[tuple[str, str, float], pd.DataFrame]) -> tuple[float, float, str]:
    """Heats by user count, then by requests per run (a short workload before its raised
    count), then by name."""
    (_, _, users), heat = item
    requests = pd.to_numeric(heat["requests"], errors="coerce").max()
    return users, -1.0 if pd.isna(requests) else float(requests), str(heat["workload"].iloc[0])


def _curves_section(report: Report, runs: pd.DataFrame, suffix: str, about: str) -> None:
    """Each configuration's curve across user counts, drawn once for every heat; left out where
    no configuration ran more than one user count (a plot of one point per engine says nothing)."""
    cells = heat_cells(runs)
    if not any(len(line) > 1 for _, line, _ in curves(cells)):
        return
    report.heading(2, f"Across user counts{about}")
    report.text("One line per configuration through its heats. Completion time follows the "
                "request count, which may differ from heat to heat; tok/s and the frontier do "
                "not depend on it.")
    plot_users(cells, report.out / f"users{suffix}.png")
    report.image(report.out / f"users{suffix}.png",
                 "completion time and output tok/s against users")
    plot_frontier(cells, report.out / f"frontier{suffix}.png")
    report.heading(3, "Throughput-latency frontier")
    report.image(report.out / f"frontier{suffix}.png", "output tok/s against TTFT p99 and ITL p99")
    _gpus_plot(report, runs, suffix)


def _heat_section(report: Report, heat: pd.DataFrame, suffix: str, about: str,
                  baseline: str | None, name_sha: bool) -> None:
    """One heat: every engine's cell in one table, their latency distributions, flag effects."""
    title = f"Heat: {heat_label(heat)}{about}"
    report.heading(2, title)
    engines = sorted(set(heat["engine"].astype(str)))
    report.text(f"{len(heat)} run{'' if len(heat) == 1 else 's'} of {', '.join(engines)}; "
                f"{_workload_text(heat, name_sha)}. "
                f"{_race_notes(heat, ('output_tokens_source',))}".strip())
    table = comparison_markdown(cell_table(heat))
    report.table(table)
    report.tables.append(f"{title}\n{table}")
    _gpus_section(report, heat)
    _engine_processes_section(report, heat)
    _flags_section(report, heat, baseline)
    _distribution_section(report, heat, suffix)


# what a workload source was asked for (loadtest/workload), where the row says it
_SOURCE_COLUMNS = ("input_len", "output_len", "prefix_groups", "prefix_len", "think_time_s",
                   "workload_seed")


def _workload_text(heat: pd.DataFrame, name_sha: bool) -> str:
    """The heat's workload: its source and what the source was asked for, its digest."""
    first = heat.iloc[0]
    source = str(first.get("workload_source") or "")
    asked = [f"{column} {first[column]}" for column in _SOURCE_COLUMNS
             if column in heat and str(first[column]) not in ("", "nan")]
    sha = str(first["workload_sha256"])[:12] or "?"
    text = f"workload `{first['workload']}`" + (f" from source `{source}`" if source else "")
    text += f" ({', '.join(asked)})" if asked else ""
    return text + (f", sha256 {sha}" if name_sha or source else "")


def _gpus_section(report: Report, runs: pd.DataFrame) -> None:
    """Each GPU's utilization and memory in a heat, for runs that sampled more than one GPU."""
    cells = gpu_cells(per_gpu_rows(runs))
    if cells.empty:
        return
    report.heading(3, "Each GPU: utilization and memory")
    report.once("From each run's telemetry (NVML, sampled during the run): per GPU, its mean "
                "utilization (the share of time a kernel ran on it; min-max over the repeats), "
                "its peak memory and mean power, averaged over the cell's repeats. A layout that "
                "keeps one GPU waiting for the other shows it here, not in the pooled "
                "`gpu_util_mean_pct` of the runs table.")
    report.table(gpus_markdown(cells))


def _engine_processes_section(report: Report, runs: pd.DataFrame) -> None:
    """The engine's busiest host processes in a heat, for runs that measured them."""
    cells = engine_process_cells(engine_process_rows(runs))
    if cells.empty:
        return
    report.heading(3, "The engine's busiest processes: CPU")
    report.once("From each run's run.json (`engine_processes`: each process of the engine's "
                "process trees, each replica's behind a balancer, on the host the rig started it "
                "on): the busiest processes by name, in % of one core over the run, averaged "
                "over the cell's repeats (min-max over them; x2: two processes of that name in "
                "a run, the busiest counted, numbered siblings as one: `VLLM::Worker_TPN` for "
                "`_TP0`, `_TP1`, ...). A process near 100% holds a whole core: one "
                "host-side process, such as an API server, can limit a layout while its GPUs "
                "wait. A GPU worker that spin-waits on its GPU shows a full core too, so look "
                "at which process it is. Where the engine names its API servers, a column gives "
                "the busiest one's share (`engine_front_end_cpu_max_pct`), which the top names "
                "can leave out.")
    report.table(engine_processes_markdown(cells, front_end_cells(runs)))


def _gpus_plot(report: Report, runs: pd.DataFrame, suffix: str) -> None:
    """Each GPU's utilization and memory against users, drawn once, where runs sampled more
    than one GPU at more than one user count."""
    cells = gpu_cells(per_gpu_rows(runs))
    if cells.empty or cells["users"].nunique() < 2:
        return
    report.heading(3, "Each GPU against users")
    path = report.out / f"gpus{suffix}.png"
    plot_gpus(cells, path)
    report.image(path, "utilization and peak memory of each GPU against users")


def _flags_section(report: Report, runs: pd.DataFrame, baseline: str | None) -> None:
    effects = flag_effects(runs, baseline)
    if effects.empty:
        if baseline is not None and runs["flags"].nunique() > 1:
            report.heading(3, "Flag effects")
            report.text(f"No cell ran the baseline flags `{baseline}`: nothing to compare with.")
        return
    report.heading(3, "Flag effects")
    report.once("Each options cell against the baseline options at the same engine, gpu and "
                "users. Ratios are cell / baseline (tok/s above 1 is faster; time and latency "
                "above 1 are slower). A difference counts only when it is larger than both "
                "cells' repeat spreads added together.")
    report.table(flag_effects_markdown(effects))


def _distribution_section(report: Report, runs: pd.DataFrame, suffix: str) -> None:
    chosen = runs.tail(_MAX_DISTRIBUTION_RUNS)
    samples = []
    for _, run in chosen.iterrows():
        folder = run_files(run)
        if folder is not None:
            samples.append((_run_label(run), read_requests(folder)))
    if not samples:
        report.once("No requests.jsonl beside these runs (a runs.csv kept without its runs/ "
                    "folder): no latency distributions.")
        return
    path = report.out / f"distributions{suffix}.png"
    plot_distributions([(label, frame) for label, frame in samples if not frame.empty], path)
    report.heading(3, "Per-run TTFT and ITL distributions")
    if len(runs) > len(chosen):
        report.text(f"The latest {len(chosen)} of {len(runs)} runs.")
    missing = len(chosen) - len(samples)
    if missing:
        report.text(f"{missing} run(s) have no requests.jsonl where runs.csv says: not drawn.")
    report.image(path, "TTFT and ITL per run")


def _timeline_section(report: Report, runs: pd.DataFrame, about: str = "") -> None:
    """One timeline per configuration: its run with the most users (the most queueing)."""
    chosen = [config.sort_values(["users", "timestamp"]).iloc[-1]
              for _, config in runs.groupby(CONFIG, sort=True, dropna=False)]
    found = [(run, run_files(run)) for run in chosen]
    report.heading(2, f"Request timelines{about}")
    if all(folder is None for _, folder in found):
        report.text("No run has its requests.jsonl here (runs.csv was kept without its runs/ "
                    "folder): no timelines.")
        return
    report.text("Per configuration, the run with the most users (its last repeat): one bar per "
                "request, orange while it waits for its first token, blue while it decodes; "
                "the engine's and GPUs' telemetry, where recorded, on the same time axis.")
    for run, folder in found:
        if folder is None:
            report.text(f"`{run['run_id']}`: no requests.jsonl found.")
            continue
        path = report.out / "timelines" / f"{run['run_id']}.png"
        plot_timeline(f"{_run_label(run)} ({run['run_id']})", read_requests(folder),
                      read_telemetry(folder), path)
        report.image(path, f"timeline of {run['run_id']}")


def _runs_section(report: Report, runs: pd.DataFrame, about: str = "",
                  prices: GpuPrices | None = None) -> None:
    report.heading(2, f"Runs{about}")
    measured = measure_runs(runs, prices)
    costs = _cost_columns(measured, prices)
    telemetry = [c for c in ("gpu_mem_peak_mib", "gpu_util_mean_pct", "gpu_energy_j",
                             "gpu_j_per_output_token", "engine_kv_cache_peak_pct",
                             "engine_waiting_peak") if c in runs and runs[c].notna().any()]
    header = ["run", "engine", "options", "workload", "users", "repeat", "tok/s", "time (s)", "failed", "client CPU %",
              "telemetry", *telemetry, *costs, "warnings"]
    body = []
    for (_, run), (_, measures) in zip(runs.iterrows(), measured.iterrows()):
        body.append([f"`{run['run_id']}`", str(run["engine"]),
                     f"`{run['flags']}`" if run["flags"] else "(defaults)", str(run["workload"]),
                     _cell(run.get("users"), 0), _cell(run.get("repeat"), 0),
                     _cell(run.get("output_tok_per_s"), 1), _cell(run.get("completion_time_s"), 2),
                     _cell(run.get("failed"), 0), _cell(run.get("client_cpu_max_pct"), 0),
                     _telemetry_state(run), *[_cell(run.get(c), 3) for c in telemetry],
                     *[_cost_cell(measures, column) for column in costs.values()],
                     str(run["warnings"]).replace(";", ", ")])
    report.table(markdown_table(header, body))


def _cost_columns(measured: pd.DataFrame, prices: GpuPrices | None) -> dict[str, str]:
    """The runs table's cost and energy columns (header -> measure): dollars where a price
    was given, energy where any run measured it."""
    columns = {"$/M output tokens": "usd_per_m_tokens"} if prices is not None else {}
    if measured["kwh_per_m_tokens"].notna().any():
        columns["kWh/M output tokens"] = "kwh_per_m_tokens"
    return columns


def _cost_cell(measures: pd.Series, column: str) -> str:
    """A run's dollars or kWh per million output tokens, or which figure it lacks."""
    if pd.notna(measures[column]):
        return _cell(measures[column], 3)
    return f"- ({measures['no_usd' if column == 'usd_per_m_tokens' else 'no_kwh']})"


def _telemetry_state(run: pd.Series) -> str:
    gpu, engine = run.get("telemetry_gpu") or "", run.get("telemetry_engine") or ""
    if not gpu and not engine:
        return "-"
    return f"gpu {gpu or '-'}, engine {engine or '-'}"


def _warnings_section(report: Report, runs: pd.DataFrame) -> None:
    names = sorted({n for cell in runs["warnings"].astype(str) for n in cell.split(";") if n})
    if not names:
        return
    report.heading(2, "Warnings")
    report.text("\n".join(f"- `{n}`: {WARNINGS.get(n, '(unknown warning)')}" for n in names))


def _run_label(run: pd.Series) -> str:
    return f"{config_label(run)} u{_cell(run.get('users'), 0)} r{_cell(run.get('repeat'), 0)}"


def _cell(value: object, digits: int) -> str:
    number = pd.to_numeric(value, errors="coerce")
    return "-" if pd.isna(number) else f"{number:,.{digits}f}"


def _empty_report(out: Path, message: str) -> Report:
    report = Report(out)
    report.heading(1, "llm-load-rig report")
    report.text(message)
    return report


def _write(report: Report) -> None:
    report.out.mkdir(parents=True, exist_ok=True)
    (report.out / "report.md").write_text(report.markdown(), encoding="utf-8")
    (report.out / "report.html").write_text(report.html(), encoding="utf-8")


def _html_block(kind: str, content: str, out: Path) -> str:
    if kind.startswith("h"):
        return f"<{kind}>{_inline(content)}</{kind}>"
    if kind == "img":
        src, alt = content.split("\n", 1)
        data = base64.b64encode((out / src).read_bytes()).decode("ascii")
        return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'
    if kind == "table":
        return _html_table(content)
    if content.startswith("- "):
        items = "".join(f"<li>{_inline(line[2:])}</li>" for line in content.splitlines())
        return f"<ul>{items}</ul>"
    return f"<p>{_inline(content)}</p>"


def _html_table(markdown: str) -> str:
    lines = markdown.splitlines()
    rows = [_split_row(line) for line in lines[:1] + lines[2:]]
    head = "".join(f"<th>{_inline(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>"
                   for row in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
    return [c.strip().replace("\\|", "|") for c in cells]


def _inline(text: str) -> str:
    text = html.escape(text)
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)


_HTML_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>llm-load-rig report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; }}
table {{ border-collapse: collapse; font-size: 12px; margin: 1em 0; display: block;
         overflow-x: auto; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: right; }}
th {{ background: #f3f3f3; }}
td:first-child, td:nth-child(2), td:last-child,
th:first-child, th:nth-child(2), th:last-child {{ text-align: left; }}
td {{ white-space: nowrap; }}
td:last-child {{ min-width: 14em; white-space: normal; }}
img {{ max-width: 100%; }}
code {{ font-size: 12px; }}
</style></head><body>
{body}
</body></html>
"""
