"""The report path: results files -> tables, plots and the report (python -m loadtest.report).

runset (every runs.csv row under a folder; heats and models) -> tables (cells, flags) and race
(fastest engine per heat) -> plots (PNGs) -> build (report.md, report.html, the console tables:
one section per heat).
"""
