"""The `rig` command (main.py) and the commands that live here: `rig run` (run.py, the locustfile
under Locust) and `rig k8s` (k8s.py). The top floor: nothing outside it imports it (the toolkit
every command stands on is loadtest/toolkit, the one way to launch a run loadtest/launch)."""
