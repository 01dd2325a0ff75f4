#!/usr/bin/env bash
# usage: scripts/convert_exl3.sh HF_DIR OUT_DIR BITS [CAL_ROWS CAL_COLS]
# A Hugging Face model folder (servers/vllm-cpu/tiny_model.py --shape llama3-8b writes one) to
# ExLlamaV3's EXL3 format at BITS bits per weight, with exllamav3's own converter, on the GPU:
#   python -m exllamav3.conversion.convert_model -i HF_DIR -o OUT_DIR -w OUT_DIR.work -b BITS
# then prints how long it took. CAL_ROWS x CAL_COLS: the calibration's size (the converter's
# default 250 x 2048); a random-weight model, measured for speed alone, converts as fast with less.
# The interpreter: RIG_EXLLAMAV3_PYTHON, else RIG_TEXTGEN_PYTHON
# (TARGET/python of `scripts/gpu_bundle.sh install ... --name exllamav3`), else python3.
# Its first use on a machine compiles exllamav3's extension (minutes) unless TORCH_EXTENSIONS_DIR
# holds it already (docs/textgen.md). The model needs a real tokenizer (one that can encode " ").
set -uo pipefail
fail() { echo "error: $*" >&2; exit 2; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
(( $# == 3 || $# == 5 )) || fail "give HF_DIR OUT_DIR BITS [CAL_ROWS CAL_COLS] (got $# argument(s)); --help says more"
hf=$1 out=$2 bits=$3 calibration=()
if (( $# == 5 )); then
  [[ $4 =~ ^[1-9][0-9]{0,5}$ && $5 =~ ^[1-9][0-9]{0,5}$ ]] \
    || fail "calibration rows and columns '$4' '$5': two whole numbers from 1, e.g. 16 512"
  calibration=(-cr "$4" -cc "$5")
fi
[[ -f $hf/config.json ]] || fail "no model at $hf (no config.json)"
[[ $bits =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v b="$bits" 'BEGIN { exit !(b >= 1 && b <= 8) }' \
  || fail "bits per weight '$bits': a number from 1 to 8, e.g. 4.0"
[[ -e $out && -n $(ls -A "$out" 2>/dev/null) ]] && fail "$out is not empty: give a new folder"
python=${RIG_EXLLAMAV3_PYTHON:-${RIG_TEXTGEN_PYTHON:-python3}}
command -v "$python" >/dev/null || fail "no interpreter $python: set RIG_EXLLAMAV3_PYTHON"
mkdir -p "$out" "$out.work" || fail "cannot create $out"
started=$(date +%s.%N)
"$python" -m exllamav3.conversion.convert_model -i "$hf" -o "$out" -w "$out.work" -b "$bits" "${calibration[@]}" \
  || fail "exllamav3's converter failed (exit $?); its work folder is kept: $out.work (-r resumes)"
rm -rf "$out.work"
echo "converted $hf to $out at $bits bits per weight in $(awk -v s="$started" -v e="$(date +%s.%N)" \
  'BEGIN { printf "%.1f", e - s }') s"
