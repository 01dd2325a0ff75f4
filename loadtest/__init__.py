"""llm-load-rig: race LLM inference engines on one fixed workload, measured exactly.

Data flow, one module per stage:
workload (prompts -> RequestSpec) -> protocols (body, stream events) -> transport (send ->
RequestRecord) -> dispatch (exactly N requests across users and processes) -> summary
(records -> run row) -> results (files) -> report.
"""

__version__ = "0.1.0"
