"""Benchmarks of the rig itself: `client` races the rig's Locust path against a lean aiohttp
client on the same engine and workload (`rig bench`, scripts/bench_client.sh)."""
