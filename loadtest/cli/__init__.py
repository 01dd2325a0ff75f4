"""The `rig` command and what every command line of the rig shares: one argparse base
(`args.RigParser`), one set of option types (`types`), one Locust command builder (`locust`), one
way to find a free port and stop a process group (`processes`)."""
