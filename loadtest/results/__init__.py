"""The results path: per-request records -> the run's row -> files.

record (one request, the metric definitions) -> summary (records -> run numbers) -> checks
(warnings) and verdict (valid / invalid) -> files (runs.csv, run.json, requests.jsonl, written
whole or not at all); metadata, version and redact say who measured what, with no secrets.
"""
