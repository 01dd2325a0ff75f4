"""Results a user can query: results folders -> Parquet files and one DuckDB database, and back.

tables (folders -> typed runs, requests and run_files tables) -> store (the files, written whole;
read back, or laid out as a results folder for the report) -> cli (`rig export`).
"""

from loadtest.export.tables import ExportError, Tables, read_results

__all__ = ["ExportError", "Tables", "read_results"]
