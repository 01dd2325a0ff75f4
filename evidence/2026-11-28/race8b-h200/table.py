"""The 8B race's tables of README.md from the runs-*.csv files (run from this folder)."""
import csv

SERVED = (("vllm", "vLLM (bf16)"), ("sglang", "SGLang (bf16, Triton attention)"), ("aphrodite", "Aphrodite (bf16)"),
          ("llamacpp", "llama.cpp CUDA (bf16 GGUF)"),
          ("textgen-exl3", "text-generation-webui, ExLlamav3 loader (EXL3 4.0 bits; half the requests)"))
INPROCESS = (("4.0", "ExLlamaV3 in-process (EXL3 4.0 bits)"), ("6.0", "ExLlamaV3 in-process (EXL3 6.0 bits)"))
DOUBTS = ("front_end_saturated",)


def rows(name: str) -> list[dict]:
    return list(csv.DictReader(open(f"runs-{name}.csv")))


def cell(r: dict) -> str:
    text = f"{float(r['output_tok_per_s']):,.0f} ({float(r['ttft_p50_ms']):,.1f}; {float(r['itl_p50_ms']):.2f})"
    if r["verdict"] != "valid":
        text += f", **invalid**: {r['verdict_reasons']}"
    doubts = [w for w in r["warnings"].split(";") if w in DOUBTS]
    return text + (f", {', '.join(doubts)}" if doubts else "")


columns = [(label, rows(name)) for name, label in SERVED]
exl3 = rows("exl3")
columns += [(label, [r for r in exl3 if r["tag"].startswith(f"exl3-8b-{bits}")]) for bits, label in INPROCESS]
print("| users | " + " | ".join(label for label, _ in columns) + " |")
print("|---" * (len(columns) + 1) + "|")
for users in ("1", "4", "16", "64", "256"):
    cells = []
    for _, found in columns:
        here = [r for r in found if r["users"] == users]
        cells.append("<br>".join(f"r{i}: {cell(r)}" if len(here) > 1 else cell(r)
                                 for i, r in enumerate(here, start=1)) or "-")
    print(f"| {users} | " + " | ".join(cells) + " |")
peaks = []
for _, found in columns:
    mib = [float(r["gpu_mem_peak_mib"]) for r in found if r.get("gpu_mem_peak_mib")]
    peaks.append(f"{max(mib) / 1024:.1f} GiB" if mib else "not sampled (in-process)")
print("| GPU memory, peak | " + " | ".join(peaks) + " |")
joules = []
for _, found in columns:
    at = {r["users"]: r.get("gpu_j_per_output_token") for r in found}
    joules.append(" / ".join(f"{float(at[u]):.3f}" if at.get(u) else "-" for u in ("1", "64", "256")))
print("| J per output token at 1 / 64 / 256 users | " + " | ".join(joules) + " |")
