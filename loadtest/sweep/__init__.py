"""Sweeps: client threads and engine flags, orchestrated and resumable.

    python -m loadtest.sweep.threads ENGINE --users 1,4,16,64 --repeats 2   (scripts/sweep_threads.sh)
    python -m loadtest.sweep.flags MATRIX.yaml [--dry-run]                    (scripts/sweep_flags.sh)

One module per stage: matrix (load + check the YAML) -> cells (names and hashes) -> launch
(start/stop an engine) -> measure (one Locust run) -> state (sweep.json) -> table (results);
repeats: which cells run again until the fastest configuration is known (--until-known).
A thread sweep is a flag sweep with one engine configuration.
"""

# Nothing imported here: `rig sweep ... --help` and its bad-input errors load only the command's
# own module, not pandas (the results table) or the workload builders.
