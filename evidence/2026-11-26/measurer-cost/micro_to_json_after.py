"""RequestRecord.to_json before (REV's record.py, through dataclasses.asdict) and after (this
tree's), side by side in one process: the same realistic record (a 128-token answer, 127 gaps),
CPU time (time.process_time) per call, REPEATS paired repeats alternating which goes first;
prints each's median and the after/before ratio (median, 10th-90th percentile, min-max).
usage: python micro_to_json_after.py [REV]   (run from the repository root; REV default HEAD)"""
import importlib.util, json, statistics, subprocess, sys, time, timeit

rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
source = subprocess.run(["git", "show", f"{rev}:loadtest/results/record.py"], check=True,
                        capture_output=True, text=True).stdout
spec = importlib.util.spec_from_loader("record_before", loader=None)
before = importlib.util.module_from_spec(spec)
sys.modules["record_before"] = before
exec(compile(source, f"{rev}:record.py", "exec"), before.__dict__)
from loadtest.results import record as after


def make(module):
    r = module.RequestRecord(17, "mixed-0042", 1_795_000_000.123456, 81_000_000_000, worker=1)
    r.first_chunk_ns = r.sent_ns + 50_213_407
    r.chunk_gaps_ns = [10_000_000 + (k * 7919) % 40_000 - 20_000 for k in range(127)]
    r.done_ns = r.first_chunk_ns + sum(r.chunk_gaps_ns)
    r.output_chunks, r.output_tokens, r.prompt_tokens = 128, 128, 211
    r.output_tokens_source, r.finish_reason, r.http_status = "usage", "length", 200
    return r


old, new = make(before), make(after)
assert json.dumps(old.to_json()) == json.dumps(new.to_json())
N, REPEATS = 2000, 41
cases = {"to_json": (old.to_json, new.to_json),
         "to_json + json.dumps (the line)": (lambda: json.dumps(old.to_json(), separators=(",", ":")),
                                             lambda: json.dumps(new.to_json(), separators=(",", ":")))}
for name, (f_old, f_new) in cases.items():
    t_old, t_new, ratios = [], [], []
    for k in range(REPEATS):
        pair = [(f_old, t_old), (f_new, t_new)][:: 1 if k % 2 else -1]
        for fn, into in pair:
            into.append(timeit.Timer(fn, timer=time.process_time).timeit(N) / N * 1e6)
        ratios.append(t_new[-1] / t_old[-1])
    q = statistics.quantiles(ratios, n=10)
    print(f"{name}: before {statistics.median(t_old):.1f} us, after {statistics.median(t_new):.1f} us"
          f" (CPU per call, medians of {REPEATS} x {N}); after/before {statistics.median(ratios):.4f}"
          f" (10-90%: {q[0]:.4f}-{q[-1]:.4f}; min-max {min(ratios):.4f}-{max(ratios):.4f})")
