"""Results a user can query: results folders -> Parquet files and one DuckDB database, and back.

tables (folders -> typed runs, requests and run_files tables) -> store (the files, written whole;
read back, or laid out as a results folder for the report) -> cli (`rig export`). Nothing is
imported here: `rig export --help` and bad options answer before pandas loads.
"""

__all__: list[str] = []
