# usage: python3 table.py (in the folder meta.sh wrote reports/ into): one row per sglang release
import json, glob, re
from packaging.version import Version
rows = []
for path in glob.glob("reports/sglang-[0-9]*.json"):
    item = json.load(open(path))["install"][0]
    meta = item["metadata"]
    req = meta.get("requires_dist", [])
    pick = lambda pat: "; ".join(d.split(";")[0] for d in req if re.match(pat, d)) or "-"
    wheel = item["download_info"]["url"].rsplit("/", 1)[-1]
    rows.append((Version(meta["version"]), pick(r"torch[=<> ]"), pick(r"(sgl-kernel|sgl_kernel|sglang-kernel|sglang_kernel)"), pick(r"flashinfer"), wheel))
for v, t, k, f, w in sorted(rows):
    print(f"| {v} | {t} | {k} | {f} | {w} |")
