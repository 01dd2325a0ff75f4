"""The live view: what a person watches while a run goes on, read from the client's records.

progress.py (the console's progress line, headless) and webui.py (an LLM tab, a page of the
run's own, /llm, and its JSON in Locust's web UI) show the run's figures so far; series.py
holds them over time for the page's charts; prometheus.py writes them at /metrics.

Presentation only: these modules read a Run (loadtest/client/run.py) and its records, and
nothing under loadtest/client/ imports them. The locustfile (loadtest/engines.py) wires them
in: it installs the web UI's routes and hands the run the progress line's close(), which the
run calls before its summary (Run.before_summary).
"""
