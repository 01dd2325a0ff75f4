"""Synthetic conversations: --requests sessions of --turns turns each. Each user message is
--input-len tokens of whole-word text, each answer asked for --output-len tokens, and
--think-time seconds pass between an answer and the next turn (none before the first).
The client (loadtest/client/conversation.py) sends each turn with the conversation so far,
the engine's own answers included, so later turns carry ever longer shared prefixes."""

from __future__ import annotations

from loadtest.workload.items import Context
from loadtest.workload.spec import SessionSpec, TurnSpec

__all__ = ["conversation_name", "conversation_sessions"]

_LENGTHS, _OUTPUTS, _TEXT = 41, 42, 43


def conversation_sessions(context: Context) -> list[SessionSpec]:
    tokens = context.need_tokens()
    o = context.options
    assert o.input_len is not None
    count = context.requests * o.turns
    inputs = o.input_len.draw(context.rng(_LENGTHS), count)
    outputs = context.output_lengths(context.rng(_OUTPUTS), count)
    rng = context.rng(_TEXT)
    sessions = []
    for session_id in range(context.requests):
        turns = []
        for turn in range(o.turns):
            n = session_id * o.turns + turn
            # a user message, not a whole prompt: no special tokens of its own
            turns.append(TurnSpec(tokens.words_text(rng, int(inputs[n])), int(outputs[n]),
                                  o.think_time_s if turn else 0.0, int(inputs[n])))
        sessions.append(SessionSpec(session_id, f"conv-{session_id}", tuple(turns)))
    return sessions


def conversation_name(context: Context) -> str:
    o = context.options
    assert o.input_len is not None
    think = f"-think{o.think_time_s:g}s" if o.think_time_s else ""
    return f"conv-{o.turns}t-{o.input_len.label}x{context.output_label}{think}-{context.requests}"
