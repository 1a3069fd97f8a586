#!/usr/bin/env bash
# The VRAM expert tier against static placement (see bench/README.md): Strata's table, measured here.
#
#   bench/gpu_tier_bench.sh [MODEL.gguf]
#     MODEL   default: on a GPU, build/bench/qwen3-30b-a3b-Q4_K_M.gguf (~17 GB); on a CPU device (lavapipe),
#             build/bench/qwen3-30b-a3b-narrow-Q4_K_M.gguf (~0.7 GB: Qwen3-30B-A3B's 48 x 128 experts at test
#             width), written with `moetier synth` if missing
#   env: BIN (build/release/moetier), PAIRS (3) alternating pairs of defaults / --adapt-tuned runs, PCT (30) the share of the experts the VRAM
#        tier holds (--experts-vram PCT%), ROUTE (the shared Qwen3 routing trace: prompt rows replayed, then its 128
#        decode steps), TOKENS (its decode steps, 128), THREADS (2), DEVICE (0), OUT (build/bench/gpu_tier)
#
# Every run replays the same routing (--route-replay), so the counts compare the tiers, not the prompts. Per
# configuration: decode misses per MoE layer and round split into the CPU pool's and the PCIe share's, the hit
# rate, the CPU pool's ms per round, the MB per round that cross PCIe (the share's copies and the swaps), swaps
# landed per round, and the round time (a decode token's wall ms) as mean +- sd over the pairs. Then the same model
# under static placement (-ngl 99 --n-cpu-moe N: the experts of the last PCT% of the blocks on the GPU, the others
# computed by the CPU), its decode tok/s against the tier's. On a CPU device the times are the CPU's own work
# twice over (lavapipe runs the "GPU" on the same cores): read the counts, not the times.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-build/release/moetier}
[ -x "$bin" ] || { echo "gpu_tier_bench: build first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
command -v jq > /dev/null || { echo "gpu_tier_bench: needs jq (scripts/setup-deps.sh installs it)" >&2; exit 1; }
pairs=${PAIRS:-3}; pct=${PCT:-30}; threads=${THREADS:-2}; device=${DEVICE:-0}; out=${OUT:-build/bench/gpu_tier}
route=${ROUTE:-../shared/traces/bigmoeonedge-2026-07-15/qwen.route.csv}
tokens=${TOKENS:-128}
mkdir -p "$out"
dev_type=$("$bin" devices --json | jq -r ".[$device].type")
if [ $# -ge 1 ]; then
  model=$1
elif [ "$dev_type" = cpu ]; then
  model=build/bench/qwen3-30b-a3b-narrow-Q4_K_M.gguf
else
  model=build/bench/qwen3-30b-a3b-Q4_K_M.gguf
fi
if [ ! -f "$model" ]; then
  preset=qwen3-30b-a3b; case $model in *narrow*) preset=qwen3-30b-a3b-narrow ;; esac
  mkdir -p "$(dirname "$model")"
  "$bin" synth --preset "$preset" --type Q4_K_M -o "$model"
fi
n_layer=$("$bin" inspect -m "$model" --json | jq '.hyperparameters.block_count')
n_cpu_moe=$(( n_layer - (n_layer * pct + 50) / 100 ))
# The trace's prompt rows are replayed by as many prompt tokens: give that many.
prompt_tokens=$(awk -F, '!/^#/ && $2 == 0 { seen[$3] = 1 } END { n = 0; for (k in seen) n++; print n }' "$route" |
                tail -1)
ids="[$(seq -s, 1 "$prompt_tokens")]"
common=(-m "$model" --tokens "$ids" -n "$tokens" -t "$threads" --device "$device" -ngl 99 --route-replay "$route"
        --temp 0 --ignore-eos)

run() {  # name, extra flags...
  local name=$1; shift
  "$bin" run "${common[@]}" --csv "$out/$name.csv" "$@" > "$out/$name.log" 2>&1 ||
    { echo "gpu_tier_bench: $name failed, see $out/$name.log" >&2; tail -5 "$out/$name.log" >&2; exit 1; }
}

for i in $(seq 1 "$pairs"); do
  echo "pair $i of $pairs" >&2
  # The defaults named: at 20-60% of the experts the engine would pick the tuned ones itself.
  run "defaults-$i" --experts-vram "$pct%" --adapt-every 4 --adapt-swaps 96 --adapt-decay 0.7
  run "tuned-$i" --experts-vram "$pct%" --adapt-tuned
done
run static --n-cpu-moe "$n_cpu_moe"

# One configuration's row from its CSVs: every figure the mean over the runs, the round time with its sd.
summary() {  # files...
  awk '
    /^# summary / {
      n++
      for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      d = v["decode_tokens"]; r = d > 0 ? v["decode_ms"] / d : 0
      rt[n] = r
      cpu_l += v["vram_cpu_per_layer"]; pcie_l += v["vram_pcie_per_layer"]; hit += v["vram_hit_pct"]
      pool += d > 0 ? v["vram_cpu_ms"] / d : 0
      mb += d > 0 ? (v["vram_pcie_bytes"] + v["vram_copy_bytes"]) / 1e6 / d : 0
      sw += d > 0 ? v["vram_swaps"] / d : 0
      tps += d > 0 ? d * 1000 / v["decode_ms"] : 0
    }
    END {
      if (n == 0) { print "| no runs |"; exit }
      m = 0; for (k = 1; k <= n; k++) m += rt[k]; m /= n
      s = 0; for (k = 1; k <= n; k++) s += (rt[k] - m) ^ 2; s = n > 1 ? sqrt(s / (n - 1)) : 0
      printf "| %.2f + %.2f | %.3f | %.1f | %.1f | %.2f | %.1f +- %.1f | %.2f |\n", cpu_l / n, pcie_l / n, hit / n / 100,
             pool / n, mb / n, sw / n, m, s, tps / n
    }' "$@"
}

echo
echo "model $(basename "$model"), device $device ($dev_type), $tokens decode rounds replayed from $(basename "$route"),"
echo "VRAM tier $pct% of the experts ($(grep -a -m1 -o '[0-9]* VRAM slots[^,]*' "$out/defaults-1.log"))"
echo
echo "| configuration | misses per layer (CPU + PCIe) | hit rate | CPU pool ms per round | MB per round over PCIe | swaps per round | round ms | decode tok/s |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
printf "| defaults (every 4 rounds, 96 swaps, x0.7) "
summary "$out"/defaults-*.csv
printf "| --adapt-tuned (every 2 rounds, 192 swaps, x0.92) "
summary "$out"/tuned-*.csv
static_tps=$(awk '/^# summary / { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                  print v["decode_tokens"] * 1000 / v["decode_ms"] }' "$out/static.csv")
echo
echo "static placement (-ngl 99 --n-cpu-moe $n_cpu_moe: the experts of the last $((n_layer - n_cpu_moe)) of $n_layer blocks on the GPU): $static_tps decode tok/s"
if [ "$dev_type" = cpu ]; then
  echo "(a CPU device: the times are not a GPU's; the counts are the tier's)"
fi
