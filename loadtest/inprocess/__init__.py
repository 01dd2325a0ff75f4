"""In-process engines: the fixed workload through an engine library, recorded as a server run is.

engines.py (the one table: venv, adapter, model, variants, paired server) -> runner.py (rig
side: workload, worker, records, rows) -> worker.py (engine side, in the engine's venv) -> one
adapter per library: hf_generate.py, vllm_offline.py, ct2.py, llamacpp_python.py (stamps.py: what
they share). cli.py is `python -m loadtest.inprocess`; latency.py the studies' table
(`rig latency`, loadtest/race/latency.py); overhead.py the server-vs-in-process comparison.
"""

__all__: list[str] = []
