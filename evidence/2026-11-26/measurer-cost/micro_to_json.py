import json, time, dataclasses
from loadtest.results.record import RequestRecord
r = RequestRecord(1, "p", time.time(), 1, worker=0)
r.first_chunk_ns, r.done_ns, r.output_chunks, r.output_tokens, r.prompt_tokens = 2, 3, 128, 128, 9
r.chunk_gaps_ns = list(range(10_000_000, 10_000_127))
r.http_status, r.finish_reason, r.output_tokens_source = 200, "length", "usage"
def fast(self):
    row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
    row["chunk_gaps_ns"] = list(self.chunk_gaps_ns); row["engine_flaws"] = list(self.engine_flaws)
    return row
N = 20000
for name, fn in (("to_json (asdict)", lambda: r.to_json()), ("asdict alone", lambda: dataclasses.asdict(r)), ("fields copied, lists copied", lambda: fast(r)), ("json.dumps of the row", None)):
    if fn is None:
        row = r.to_json(); t = time.process_time()
        for _ in range(N): json.dumps(row, separators=(",", ":"))
    else:
        t = time.process_time()
        for _ in range(N): fn()
    print(f"{name}: {(time.process_time()-t)/N*1e6:.1f} us")
