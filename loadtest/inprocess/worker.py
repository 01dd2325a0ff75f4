"""The engine side of an in-process run: loads one engine library in this process and runs the
fixed workload through it, writing one JSON line per request to the rig.

    .venv-vllm/bin/python -m loadtest.inprocess.worker < job.json

Standard library only (besides the adapter's engine): it runs in the engine's own venv, apart
from the rig's. The job (stdin, one JSON object) names the adapter (its module, one of
engines.py's), the model, its options and its rounds: each a batch size, an optional warm-up
(run first, never recorded) and the requests, one run of the rig each. The protocol goes to the
process's original stdout; everything else the engine prints (vLLM logs to stdout) is moved to
stderr first, so no library can corrupt it. Events, one JSON object a line:

    {"event": "loaded", "engine_version": "...", "load_s": 3.2, "settings": {...}}
    {"event": "warmup", "requests": 2, "seconds": 1.1}
    {"event": "record", ...RequestRecord fields (loadtest/results/record.py)...}
    {"event": "round", "index": 0}      (a round's requests all done: one run)
    {"event": "done"}
    {"event": "error", "kind": "missing", "message": "..."}   (then exit 3)

Timestamps are time.perf_counter_ns() taken in this process (CLOCK_MONOTONIC, the clock the
server rig's records use): `sent_ns` when the request is handed to the engine, then one stamp
per output event the engine exposes, `done_ns` when the engine returns the request's last token.
Token counts are the engine's own (the ids it returned), `output_tokens_source` "engine".
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any, Callable, TextIO

from loadtest.inprocess.engines import ADAPTERS
from loadtest.inprocess.stamps import Missing

__all__ = ["main"]


def _protocol_stream() -> TextIO:
    """The original stdout for the protocol; fd 1 then points at stderr, for the engine's prints
    (and for child processes it starts, which inherit fd 1)."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    sys.stdout.flush()
    os.dup2(2, 1)
    return proto


def main() -> int:
    proto = _protocol_stream()

    def send(event: str, **fields: Any) -> None:
        proto.write(json.dumps({"event": event, **fields}, separators=(",", ":")) + "\n")
        proto.flush()

    try:
        job = json.loads(sys.stdin.read())
        if job["adapter"] not in ADAPTERS:  # only the table's modules (engines.py)
            raise KeyError(job["adapter"])
        module = importlib.import_module(job["adapter"])
        started = time.perf_counter()
        adapter = module.Adapter(job["model"], job.get("options", {}), int(job.get("threads") or 0))
        send("loaded", engine_version=adapter.version, load_s=time.perf_counter() - started,
             settings=getattr(adapter, "settings", {}))
        emit: Callable[[dict[str, Any]], None] = lambda row: send("record", **row)
        # rounds: [{"batch": B, "requests": [...], "warmup": [...]}, ...], one run each
        for index, plan in enumerate(job["rounds"]):
            batch = int(plan["batch"])
            if plan.get("warmup"):
                started = time.perf_counter()
                adapter.run(plan["warmup"], batch, lambda row: None)
                send("warmup", requests=len(plan["warmup"]), seconds=time.perf_counter() - started)
            adapter.run(plan["requests"], batch, emit)
            send("round", index=index)
        close = getattr(adapter, "close", None)
        if close is not None:
            close()
        send("done")
        return 0
    except Missing as exc:
        send("error", kind="missing", message=str(exc))
        return 3
    except Exception as exc:  # the engine failed: one line to the rig, the traceback to the log
        traceback.print_exc()
        send("error", kind="engine", message=f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
        return 3


if __name__ == "__main__":
    sys.exit(main())
