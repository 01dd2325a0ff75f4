"""The report path: results files -> tables, plots and the report (python -m loadtest.report).

runset (every runs.csv row under a folder) -> tables (cells, frontier, flags) and race (fastest
engine per user count) -> plots (PNGs) -> build (report.md, report.html, the console table).
"""
