"""The batch-1 study's table of README.md from the runs-*.csv files (run from this folder)."""
import csv

ENGINES = (("sglang-1b", "SGLang (bf16, Triton attention)"), ("vllm-1b", "vLLM (bf16)"),
           ("aphrodite-1b", "Aphrodite (bf16)"), ("exl3", "ExLlamaV3 in-process (EXL3 4.0 bits)"),
           ("exl3-6", "ExLlamaV3 in-process (EXL3 6.0 bits)"),
           ("textgen-exl3", "text-generation-webui, ExLlamav3 loader (4.0 bits)"))


def rows(name: str) -> list[dict]:
    found = list(csv.DictReader(open(f"runs-{name.removesuffix('-6')}.csv")))
    if name.startswith("exl3"):
        bits = "6.0" if name == "exl3-6" else "4.0"
        found = [r for r in found if r["tag"].startswith(f"exl3-{bits}")]
    return found


def cell(r: dict) -> str:
    text = (f"{float(r['output_tok_per_s']):,.0f} ({float(r['ttft_p50_ms']):.1f}; "
            f"{float(r['itl_p50_ms']):.2f})")
    if r["verdict"] != "valid":
        text += f", **invalid**: {r['verdict_reasons']}"
    if float(r["ttft_p99_ms"]) > 1000 and r["users"] == "1":
        text += f", TTFT p99 {float(r['ttft_p99_ms']):,.0f} ms"
    return text


print("| batch | " + " | ".join(label for _, label in ENGINES) + " |")
print("|---" * (len(ENGINES) + 1) + "|")
for users in ("1", "4", "16", "64"):
    cells = []
    for name, _ in ENGINES:
        found = [r for r in rows(name) if r["users"] == users]
        cells.append("<br>".join(f"r{r['repeat']}: {cell(r)}" if len(found) > 1 else cell(r) for r in found)
                     or "-")
    print(f"| {users} | " + " | ".join(cells) + " |")
peaks = []
for name, _ in ENGINES:
    mib = [float(r["gpu_mem_peak_mib"]) for r in rows(name) if r.get("gpu_mem_peak_mib")]
    peaks.append(f"{max(mib) / 1024:.1f} GiB" if mib else "not sampled (in-process)")
print("| GPU memory, peak | " + " | ".join(peaks) + " |")
