"""The rig's low floor: what every command line of the rig, and every module below them, shares.

    args.py         the argparse base (RigParser: one `error:` line and exit 2), `fail`
    types.py        the option value types and BadValue (the one check of each kind of value)
    until_known.py  --until-known and its caps, for the race and the sweeps

It used to live in loadtest/cli beside the commands, so the modules below the commands
(the client's options, the CPU layout, the servers' checks, the locustfile) imported upward into
the front door. It is its own package, not a part of loadtest/launch, because it is not about
launching a run: the report, the export, the telemetry and servers/ use it as much as the
launcher does. It imports nothing from the rest of the rig but loadtest/cpus.py and
loadtest/known.py (standard library only, both), so anything may import it.
"""
