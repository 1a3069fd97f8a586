#!/usr/bin/env bash
# Decode hit rate (%) of every cache policy on the shared route traces, replayed with the recording engine's
# batch semantics (moetier replay). Usage: bench/policy_table.sh [MOETIER_BINARY] [TRACES_DIR]
# Defaults: build-sim/moetier (else build/moetier) and ../shared/traces/bigmoeonedge-2026-07-15.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-}
if [[ -z "$bin" ]]; then
  for b in "$root/build-sim/moetier" "$root/build/moetier"; do [[ -x "$b" ]] && bin=$b && break; done
fi
[[ -x "${bin:-}" ]] || { echo "policy_table.sh: no moetier binary (pass its path)" >&2; exit 1; }
traces=${2:-$root/../shared/traces/bigmoeonedge-2026-07-15}

# column title | replay flags
columns=(
  "LRU|--policy lru"
  "LRU+guard|--policy lru --cliff-guard"
  "LFU|--policy lfu"
  "lfu-decay|--policy lfu-decay"
  "adaptive|--policy adaptive"
  "adapt-tuned|--policy adaptive --adapt-tuned"
  "reuse (ours)|--policy reuse --cliff-guard"
  "Belady|--policy belady"
)

decode_hit() {  # TRACE MIB FLAGS...: the decode hit rate, one decimal
  local trace=$1 mib=$2
  shift 2
  "$bin" replay "$trace" --cache-mb "$mib" "$@" --json | jq -r '.hit_rate.decode * 10 | round / 10'
}

table() {  # NAME TRACE MIB...
  local name=$1 trace=$2
  shift 2
  printf '\n%s (decode hit rate %%, prefill replayed first)\n' "$name"
  printf '| MiB |'
  for c in "${columns[@]}"; do printf ' %s |' "${c%%|*}"; done
  printf '\n|---|'
  for c in "${columns[@]}"; do printf -- '---|'; done
  printf '\n'
  for mib in "$@"; do
    printf '| %s |' "$mib"
    for c in "${columns[@]}"; do
      # shellcheck disable=SC2086  # the flags are meant to split
      printf ' %s |' "$(decode_hit "$trace" "$mib" ${c#*|})"
    done
    printf '\n'
  done
}

table "Qwen3-30B-A3B (qwen.route.csv)" "$traces/qwen.route.csv" 500 2000 3000 4000
table "gpt-oss-120b (gptoss.route.csv)" "$traces/gptoss.route.csv" 750 2000 3000
