"""Agentic trace replay: coding-agent sessions in the Weka KV-cache-tester trace format, as
AIPerf documents and reads it (docs/tutorials/weka-trace.md, src/aiperf/dataset/loader/
weka_trace_models.py in ai-dynamo/aiperf). One JSON object per file, one file per session:

    {"id": "trace_0001", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
     "requests": [
       {"t": 0.0, "type": "s", "model": "m", "in": 900, "out": 40, "hash_ids": [1, 2], ...},
       {"t": 4.2, "type": "subagent", "agent_id": "agent_001", "subagent_type": "Explore",
        "status": "completed", "models": ["m"], "requests": [{"t": ..., "type": "n", ...}]},
       {"t": 9.5, "type": "n", "model": "m", "in": 2100, "out": 12, "hash_ids": [1, 2, 3], ...}]}

Replayed here (--workload agentic --trace FILE|DIR, --speedup X):
- every API call (`type` "n" or "s", top level or inside a sub-agent) is one request sent at its
  recorded `t` (seconds from the session's start) / X: the trace's own schedule, open loop, so
  latency counts from it (`ttft_sched_*`, `send_lag_*`) as for Mooncake traces (trace.py);
- tool delays are the gaps the recording kept between a call and the next one of the same
  agent (the time its tools ran and the agent thought: `think_time` where recorded);
- sub-agent fan-out: a sub-agent's calls run at their own times beside the parent's, several
  sub-agents at once where the recording had them. A sub-agent's inner `t` are taken as seconds
  from the session's start, or from the spawn where they start before it (corpora differ);
- shared context: `hash_ids` name the prompt's `block_size`-token blocks; the same id in one file
  is the same text (one namespace per file, "local" scope), so the calls of a session and its
  sub-agents share their prefixes as recorded;
- a directory's sessions all start at 0 together.

Not replayed: the recorded dependency itself. A call is sent at its time whether or not the
call before it (or the sub-agents it waited on) has been answered; an engine slower than the
recording shows as a growing send lag and TTFT from the schedule, not as a later send (AIPerf's
fixed schedule waits on a sub-agent's join; this does not).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.results.groups import group_figures
from loadtest.results.record import RequestRecord
from loadtest.workload.items import Context
from loadtest.workload.spec import WorkloadError
from loadtest.workload.trace import MAX_TRACE_BYTES, Trace

__all__ = ["Call", "agent_figures", "agentic_columns", "files_sha256", "load_agentic",
           "read_session"]

_MAX_LENGTH = 1 << 20
_ID_BITS = 40  # a block id is (file index << 40) | hash id: one namespace per file
_MAX_SECONDS = 1e9


@dataclass(frozen=True)
class Call:
    """One API call of a session, at its absolute time in the session."""
    t: float
    inputs: int
    outputs: int
    hash_ids: tuple[int, ...]
    agent: str  # "main" or the sub-agent's agent_id
    think_time_s: float | None = None


@dataclass
class Session:
    name: str
    block_size: int
    calls: list[Call] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)  # each sub-agent's [first, last]


def read_agentic(path: Path, requests: int, min_tokens: int = 1) -> tuple[list[Session], list]:
    """The sessions and their calls in time order ((t, session, n, call)); WorkloadError for a
    bad file or fewer calls than `requests`. The tokenizer decides only `min_tokens`, the
    shortest prompt it builds: with 1, every other check, made before the engine names its
    tokenizer (loadtest/launch/checks.py)."""
    sessions = [read_session(_read(file), str(file), min_tokens) for file in _files(path)]
    block_sizes = {s.block_size for s in sessions}
    if len(block_sizes) > 1:
        raise WorkloadError(f"{path}: the sessions' block_size differ ({sorted(block_sizes)}); "
                            "replay one block size at a time")
    calls = sorted(((c.t, i, n, c) for i, s in enumerate(sessions) for n, c in enumerate(s.calls)),
                   key=lambda item: (item[0], item[1], item[2]))
    if len(calls) < requests:
        raise WorkloadError(f"{path}: {len(calls)} calls in the trace, fewer than --requests "
                            f"{requests}")
    return sessions, calls


def load_agentic(path: Path, context: Context) -> tuple[Trace, dict[str, Any]]:
    """The first `context.requests` calls in time order, as a Trace (its prompt ids
    SESSION/AGENT/N), and the row's columns that describe what was taken."""
    tokens = context.need_tokens()
    sessions, calls = read_agentic(path, context.requests, tokens.min_tokens())
    block_sizes = {s.block_size for s in sessions}
    taken = calls[:context.requests]
    ids: list[int] = []
    starts = [0]
    labels = []
    counters: dict[tuple[int, str], int] = {}
    for _, i, _, call in taken:
        ids.extend((i << _ID_BITS) | h for h in call.hash_ids)
        starts.append(len(ids))
        key = (i, call.agent)
        counters[key] = counters.get(key, 0) + 1
        labels.append(f"{sessions[i].name}/{call.agent}/{counters[key]}")
    trace = Trace(path, np.array([t * 1000 for t, *_ in taken], dtype=np.float64),
                  np.array([c.inputs for *_, c in taken], dtype=np.int64),
                  np.array([c.outputs for *_, c in taken], dtype=np.int64),
                  np.asarray(ids, dtype=np.int64), np.asarray(starts, dtype=np.int64), tokens,
                  context.options.seed, files_sha256(path), block_tokens=block_sizes.pop(),
                  labels=labels)
    return trace, agentic_columns(sessions, [(i, c) for _, i, _, c in taken])


def agent_figures(source: str, records: list[RequestRecord],
                  completion_time_s: float | None) -> dict[str, dict[str, Any]]:
    """Main agents beside sub-agents (by prompt id SESSION/AGENT/N), {} for other sources."""
    if source != "agentic":
        return {}
    return group_figures(records, lambda r: "main agents" if r.prompt_id.split("/")[1:2] == [
        "main"] else "sub-agents", completion_time_s)


def agentic_columns(sessions: list[Session], taken: list[tuple[int, Call]]) -> dict[str, Any]:
    """What the replay holds: sessions, sub-agents, the most agents of one session running at
    once as recorded, the mean recorded tool/think delay, and the share of prompt blocks a
    call shares with an earlier call of its session (the cache reuse the trace offers)."""
    used = {i for i, _ in taken}
    agents = {(i, c.agent) for i, c in taken if c.agent != "main"}
    seen: dict[int, set[int]] = {}
    shared = total = 0
    for i, call in taken:
        earlier = seen.setdefault(i, set())
        shared += sum(h in earlier for h in call.hash_ids)
        total += len(call.hash_ids)
        earlier.update(call.hash_ids)
    delays = [c.think_time_s for _, c in taken if c.think_time_s is not None]
    return {
        "agentic_sessions": len(used),
        "agentic_subagents": len(agents),
        "agentic_fanout_max": max((_most_at_once(sessions[i].spans) for i in used), default=0),
        "agentic_think_time_mean_s": round(float(np.mean(delays)), 3) if delays else None,
        "agentic_shared_blocks_pct": round(100 * shared / total, 2) if total else None,
    }


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most sub-agents whose recorded spans overlap at one moment."""
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans],
                   key=lambda edge: (edge[0], -edge[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def files_sha256(path: Path) -> str:
    """The trace's digest: its files' own digests, in name order (a folder or one file)."""
    digest = hashlib.sha256()
    for file in _files(path):
        digest.update(hashlib.sha256(_read(file)).digest())
    return digest.hexdigest()


def _read(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{file}: cannot read the trace ({exc.strerror})") from None


def _files(path: Path) -> list[Path]:
    try:
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        if not files:
            raise WorkloadError(f"{path}: no *.json trace files in the folder")
        if sum(f.stat().st_size for f in files) > MAX_TRACE_BYTES:
            raise WorkloadError(f"{path}: over {MAX_TRACE_BYTES >> 30} GiB of traces")
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read the trace ({exc.strerror})") from None
    return files


def read_session(data: bytes, where: str, min_tokens: int) -> Session:
    """One trace file: its calls, each checked; WorkloadError naming the file and request."""
    try:
        trace = json.loads(data)
    except ValueError as exc:
        raise WorkloadError(f"{where}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("requests"), list):
        raise WorkloadError(f"{where}: a trace is one object with \"id\", \"block_size\" and "
                            "\"requests\"")
    block = trace.get("block_size")
    if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= 65536:
        raise WorkloadError(f"{where}: \"block_size\" must be a whole number of tokens from 1 "
                            "to 65536")
    if trace.get("hash_id_scope", "local") != "local":
        raise WorkloadError(f"{where}: only \"hash_id_scope\": \"local\" is replayed (one "
                            "namespace per file)")
    session = Session(str(trace.get("id") or Path(where).stem), block)
    for n, entry in enumerate(trace["requests"]):
        at = f"{where}: requests[{n}]"
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "subagent":
            _subagent(session, entry, at, min_tokens)
        elif kind in ("n", "s"):
            session.calls.append(_call(entry, at, "main", 0.0, min_tokens))
        else:
            raise WorkloadError(f"{at}: \"type\" must be \"n\", \"s\" or \"subagent\"")
    if not session.calls:
        raise WorkloadError(f"{where}: no API calls in the trace")
    return session


def _subagent(session: Session, entry: dict, at: str, min_tokens: int) -> None:
    spawn = _seconds(entry.get("t"), at)
    agent = entry.get("agent_id")
    inner = entry.get("requests")
    if not isinstance(agent, str) or not agent or "/" in agent or not isinstance(inner, list):
        raise WorkloadError(f"{at}: a sub-agent needs an \"agent_id\" (no '/') and \"requests\"")
    stamps = [_seconds(r.get("t") if isinstance(r, dict) else None, f"{at}.requests[{k}]")
              for k, r in enumerate(inner)]
    base = spawn if stamps and min(stamps) < spawn else 0.0  # offsets from the spawn
    calls = []
    for k, request in enumerate(inner):
        where = f"{at}.requests[{k}]"
        if request.get("type") not in ("n", "s"):
            raise WorkloadError(f"{where}: a sub-agent's \"type\" must be \"n\" or \"s\"")
        calls.append(_call(request, where, agent, base, min_tokens))
    session.calls.extend(calls)
    if calls:
        session.spans.append((min(c.t for c in calls), max(c.t for c in calls)))


def _call(row: dict, at: str, agent: str, base: float, min_tokens: int) -> Call:
    t = _seconds(row.get("t"), at)
    lengths = []
    for name in ("in", "out"):
        value = row.get(name)
        low = min_tokens if name == "in" else 0
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _MAX_LENGTH:
            raise WorkloadError(f"{at}: \"{name}\" must be a whole number of tokens from {low} "
                                f"to {_MAX_LENGTH}")
        lengths.append(value)
    hash_ids = row.get("hash_ids", [])
    if not isinstance(hash_ids, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**_ID_BITS
            for h in hash_ids):
        raise WorkloadError(f"{at}: \"hash_ids\" must be a list of whole numbers from 0 to 2^40")
    think = row.get("think_time")
    if think is not None:
        think = _seconds(think, at, "think_time")
    # a recorded answer of 0 tokens (cancelled) is asked as 1: a request must ask for one
    return Call(base + t, lengths[0], max(1, lengths[1]), tuple(hash_ids), agent, think)


def _seconds(value: object, at: str, name: str = "t") -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not 0 <= value <= _MAX_SECONDS):
        raise WorkloadError(f"{at}: \"{name}\" must be a number of seconds >= 0")
    return float(value)
