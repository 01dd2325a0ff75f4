"""llm-load-rig: race LLM inference engines on one fixed workload, measured exactly.

Data flow, one package per path:
client/ (workload -> protocols -> transport -> dispatch: per-request records) -> results/
(record -> summary -> checks, verdict -> files) -> report/ (runset -> tables, race -> plots ->
report). engines.py is the locustfile that runs the client path; local_engine.py and cpus.py
start engines on this host; telemetry/, calibration/ and sweep/ sit beside the run.
"""

__version__ = "0.1.0"
