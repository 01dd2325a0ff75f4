"""What a workload is asked to be: WorkloadOptions, a checked workload description.

options.py is the one place that makes one from option text (and checks it); the sources build
from it (items.py's Context holds it). Apart from options.py so that what the sources import
does not reach the option checks, which read a structured workload's tasks (structured.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadtest.workload.lengths import Lengths
from loadtest.workload.lora import AdapterMix

__all__ = ["SCHEDULED", "WorkloadOptions"]

SCHEDULED = ("trace", "agentic")  # sources whose file is the schedule (--trace, --speedup)


@dataclass(frozen=True)
class WorkloadOptions:
    """A checked workload description; `max_tokens` is --max-tokens, the default output length."""

    source: str = "prompts"
    input_len: Lengths | None = None
    output_len: Lengths | None = None  # None: --max-tokens
    dataset: Path | None = None
    dataset_format: str = ""  # inferred when empty
    columns: dict[str, str] = field(default_factory=dict)
    dataset_mode: str = "first-turn"
    min_input_len: int = 0
    max_input_len: int = 0  # 0: no limit
    prefix_groups: int = 8
    prefix_len: int = 1024
    turns: int = 4
    think_time_s: float = 0.0
    trace: Path | None = None
    speedup: float = 1.0
    seed: int = 0
    tokenizer: str = ""
    lora: AdapterMix | None = None  # requests spread over LoRA adapters (loadtest/workload/lora.py)
    constraints: str = ""  # structured: a shipped set's name or a file ("": json)
    constrain: bool = True  # structured: False sends the tasks' prompts unconstrained

    @property
    def needs_tokenizer(self) -> bool:
        """Sources that build prompts to a token count (datasets: only to filter by length)."""
        return self.source in ("synthetic", "prefix", "conversation", *SCHEDULED) or bool(
            self.source == "dataset" and (self.min_input_len or self.max_input_len))
