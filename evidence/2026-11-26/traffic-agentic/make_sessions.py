"""Agent sessions in the Weka trace format (loadtest/workload/agentic.py), made up and seeded,
small enough for the tiny model's 2,048-token context: each session a main agent whose context
grows by a few blocks a turn, waiting 0.2-3 s between calls (tool time), and at some turns a
fan-out of 2-4 sub-agents that start from the parent's first blocks (shared context) and make
2-3 calls each.
usage: .venv/bin/python evidence/2026-11-26/traffic-agentic/make_sessions.py OUT_DIR [SESSIONS]"""

import json
import sys
from pathlib import Path

import numpy as np

BLOCK = 16


def session(index: int, rng: np.random.Generator) -> dict:
    requests, t, context, next_id = [], float(rng.uniform(0, 4)), [], 1
    for turn in range(int(rng.integers(5, 9))):
        grow = int(rng.integers(2, 6))
        context += list(range(next_id, next_id + grow))
        next_id += grow
        context = context[-100:]  # at most 1,600 tokens of shared blocks
        tokens = len(context) * BLOCK + int(rng.integers(1, BLOCK))
        requests.append({"t": round(t, 3), "type": "s", "model": "m", "in": tokens,
                         "out": int(rng.integers(8, 48)), "hash_ids": list(context),
                         "stop": "tool_use", "think_time": round(float(t and rng.uniform(0.2, 3)), 3)})
        t += float(rng.uniform(0.5, 3))
        if turn % 3 == 1:  # a fan-out, spawned now, the parent going on after it
            for agent in range(int(rng.integers(2, 5))):
                own, calls, at = context[:4], [], t + float(rng.uniform(0, 0.5))
                for _ in range(int(rng.integers(2, 4))):
                    own = own + list(range(next_id, next_id + 3))
                    next_id += 3
                    calls.append({"t": round(at, 3), "type": "n", "model": "m",
                                  "in": len(own) * BLOCK + 5, "out": int(rng.integers(8, 32)),
                                  "hash_ids": list(own), "think_time": 0.3})
                    at += float(rng.uniform(0.5, 2))
                requests.append({"t": round(t, 3), "type": "subagent",
                                 "agent_id": f"agent_{turn:02d}{agent}", "subagent_type": "Explore",
                                 "status": "completed", "models": ["m"], "requests": calls})
            t += 4.0
    return {"id": f"session-{index:03d}", "models": ["m"], "block_size": BLOCK,
            "hash_id_scope": "local", "requests": requests}


def main(out: Path, count: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2026)
    for index in range(count):
        (out / f"session-{index:03d}.json").write_text(json.dumps(session(index, rng)) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 12)
