"""How much load this client can measure faithfully.

pacer.py      a server that streams tokens on an exact schedule and measures its own lateness
calibrate.py  drives the pacer with the real rig at rising load; writes this machine's limits
limits.py     reads them back, and the run-side measure to compare with (events_per_s)
"""
