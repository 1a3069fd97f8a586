#!/usr/bin/env bash
# The GPU check for a machine with a GPU (issue 22; the `device` tool runs it on a lent machine), under 8 minutes:
#   1. builds Release with the Vulkan backend (MOETIER_VULKAN=ON) into $BUILD (build/gpu-check),
#   2. prints `vulkaninfo --summary` and `moetier devices --bandwidth` (the read bandwidth of a read kernel, and the
#      round trip of an empty submission: what each of the step's host waits costs),
#   3. runs the GPU tests (tests/test_gpu: every product kernel, the oracle models at -ngl 99 and --n-cpu-moe 2,
#      the CLI), under the Khronos validation layer where it is installed,
#   4. writes a synthetic Qwen3-30B-A3B Q4_K_M (`moetier synth`, ~17 GB, kept under build/bench/) and measures
#      decode and prefill tok/s at -ngl 99 (when it fits the device's memory) and at --n-cpu-moe splits, with the
#      decode bound (read bandwidth / bytes one decode token reads) and the dispatches per step,
#   5. runs bench/gpu_tier_bench.sh (the VRAM expert tier at 30% of the experts, default and tuned adaptive
#      parameters, against --n-cpu-moe static placement, driven by the shared Qwen3 routing trace),
#   6. profiles decode and prefill at -ngl 99, and decode with every layer's experts on the CPU (--n-cpu-moe at the
#      block count: what the GPU adds to a hybrid layer) (MOETIER_GPU_PROFILE=1: GPU time per kernel, submission
#      latency).
#   env: SPLITS ("48 24" --n-cpu-moe values), TOKENS (32 decode tokens), PREFILL (512 prompt tokens), DEVICE (0),
#        MODEL (build/bench/qwen3-30b-a3b-Q4_K_M.gguf), BUILD (build/gpu-check), SKIP_TESTS=1 (step 3 skipped),
#        TIER_PAIRS (1; 0 skips step 5), TEST_TIMEOUT (900 s for step 3), PROFILE=0 (step 6 skipped),
#        PREBUILT=1 (step 1 skipped: $BUILD already holds moetier and tests/test_gpu,
#        as scripts/gpu-bundle.sh brings them to a machine without glslc or the libraries)
# A device without a Vulkan driver fails at step 2 with the loader's message: that is the evidence to report.
set -euo pipefail
cd "$(dirname "$0")/.."
splits=${SPLITS:-"48 24"}; tokens=${TOKENS:-32}; prefill=${PREFILL:-512}; device=${DEVICE:-0}
model=${MODEL:-build/bench/qwen3-30b-a3b-Q4_K_M.gguf}
build=${BUILD:-build/gpu-check}
bin=$build/moetier
jobs=$(nproc)

# What the build and the benchmark need, checked before any time is spent (scripts/setup-deps.sh installs them).
tools="jq python3"
[ "${PREBUILT:-0}" = 1 ] || tools="cmake ninja glslc spirv-val $tools"
for tool in $tools; do
  command -v "$tool" >/dev/null || { echo "gpu-check: $tool is missing: run bash scripts/setup-deps.sh" >&2; exit 1; }
done
if [ "${PREBUILT:-0}" = 1 ]; then
  [ -x "$bin" ] && [ -x "$build/tests/test_gpu" ] || { echo "gpu-check: PREBUILT=1 but $bin or $build/tests/test_gpu is missing" >&2; exit 1; }
else
  [ -f /usr/include/vulkan/vulkan_raii.hpp ] || { echo "gpu-check: libvulkan-dev is missing: run bash scripts/setup-deps.sh" >&2; exit 1; }
  echo "== build (Release, Vulkan) (at ${SECONDS} s)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOETIER_VULKAN=ON >/dev/null
  cmake --build "$build" -j "$jobs" >/dev/null
fi

echo "== vulkaninfo --summary (at ${SECONDS} s)"
if command -v vulkaninfo >/dev/null; then vulkaninfo --summary 2>&1 || true; else echo "(vulkaninfo not installed: apt install vulkan-tools)"; fi
echo "== moetier devices --bandwidth (at ${SECONDS} s)"
devices_json=$("$bin" devices --bandwidth --json)
jq -r '.[] | "device \(.index): \(.name) (\(.type), Vulkan \(.api_version)), \(.memory_bytes / 1048576 | floor) MiB, subgroup \(.subgroup_size), integer dot \(.int_dot), fp16 \(.fp16), transfer queue \(.transfer_queue), read \(if .read_gbs then (.read_gbs * 10 | round / 10) else "n/a" end) GB/s, empty submission round trip \(if .submit_us then (.submit_us * 10 | round / 10) else "n/a" end) us"' <<< "$devices_json"
bw=$(jq -r ".[$device].read_gbs // empty | . * 10 | round / 10" <<< "$devices_json")
mem=$(jq -r ".[$device].memory_bytes // empty" <<< "$devices_json")
submit_us=$(jq -r ".[$device].submit_us // 0" <<< "$devices_json")
[ -n "$bw" ] && [ -n "$mem" ] || { echo "gpu-check: device $device is missing or unusable (see the list above)" >&2; exit 1; }

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== GPU tests (tests/test_gpu: every case the oracle data present gives) (at ${SECONDS} s)"
  # A failure is reported, and the benchmark still runs: both are evidence. (One process: ~5 min on lavapipe.)
  if timeout "${TEST_TIMEOUT:-900}" "$build/tests/test_gpu" --gtest_brief=1 > "$build/gpu-tests.log" 2>&1; then
    grep -E "^\[(==========|  PASSED  )\]" "$build/gpu-tests.log"
  else
    grep -E "^\[(==========|  PASSED  |  FAILED  )\]|Failure|error" "$build/gpu-tests.log" | head -40
    echo "GPU tests FAILED (the whole log: $build/gpu-tests.log)"
  fi
  echo "validation layer messages: $(grep -c '^vulkan validation' "$build/gpu-tests.log") ($(grep -c '^vulkan validation error' "$build/gpu-tests.log") errors)"
fi

echo "== $model (synthetic Qwen3-30B-A3B Q4_K_M unless MODEL is set) (at ${SECONDS} s)"
mkdir -p "$(dirname "$model")"
[ -f "$model" ] || "$bin" synth --preset qwen3-30b-a3b --type Q4_K_M -o "$model" >/dev/null
read_bytes=$("$bin" inspect --json "$model" | jq -r '.decode_read_per_token.bytes // empty')
[ -n "$read_bytes" ] && [ "$read_bytes" -gt 0 ] || { echo "gpu-check: no decode bytes per token from inspect" >&2; exit 1; }
n_layer=$("$bin" inspect --json "$model" | jq -r '.hyperparameters.block_count')
model_bytes=$(stat -c %s "$model")
out=$build/gpu-bench; mkdir -p "$out"
python3 - "$prefill" > "$out/prompt.json" <<'PY'
import json, random, sys
random.seed(7)
print(json.dumps([random.randrange(10, 500) for _ in range(int(sys.argv[1]))]))  # ids every vocabulary has (the oracle models have 512)
PY

# One run: prints "decode tok/s | prefill tok/s | dispatches per step" from the metrics CSV and the summary.
measure() {
  local csv=$out/run.csv log=$out/run.log
  "$bin" run -m "$model" --experts resident --tokens "$out/prompt.json" -n "$tokens" --temp 0 --device "$device" \
    --csv "$csv" "$@" > "$log" 2>&1 || { tail -5 "$log" >&2; return 1; }
  local summary; summary=$(grep '^# summary' "$csv")
  local field; field() { sed -n "s/.*[ ,]$1=\([^ ,]*\).*/\1/p" <<< "$summary"; }
  local dec pre
  dec=$(awk -v t="$(field decode_tokens)" -v ms="$(field decode_ms)" 'BEGIN { printf "%.2f", t / (ms / 1000) }')
  pre=$(awk -v t="$(field prefill_tokens)" -v ms="$(field prefill_ms)" 'BEGIN { printf "%.1f", t / (ms / 1000) }')
  local disp subs; disp=$(sed -n 's/^gpu: .*(\([0-9.]*\) and \([0-9.]*\) per step.*/\2/p' "$log")
  subs=$(sed -n 's/^gpu: .*(\([0-9.]*\) and \([0-9.]*\) per step.*/\1/p' "$log")
  # The host's waits alone: submissions per step times an empty submission's round trip.
  local waits; waits=$(awk -v s="${subs:-0}" -v us="$submit_us" 'BEGIN { printf "%.1f", s * us / 1000 }')
  echo "$dec | $pre | ${disp:-0} | ${subs:-0} (${waits} ms)"
}

bound=$(awk -v bw="$bw" -v b="$read_bytes" 'BEGIN { printf "%.1f", bw * 1e9 / b }')
echo "read bandwidth $bw GB/s, $((read_bytes / 1048576)) MiB read per decode token: decode bound $bound tok/s"
echo
echo "| placement | decode tok/s | prefill tok/s ($prefill tokens) | dispatches per step | submissions per step (x round trip) | decode % of bound |"
echo "| --- | --- | --- | --- | --- | --- |"
row() {
  local name=$1; shift
  local r; r=$(measure "$@") || { echo "| $name | failed (see $out/run.log) | | | | |"; return; }
  local dec=${r%% *}
  echo "| $name | $r | $(awk -v d="$dec" -v b="$bound" 'BEGIN { printf "%.0f%%", 100 * d / b }') |"
}
row "CPU only" -ngl 0
if [ "$model_bytes" -lt "$mem" ]; then row "-ngl 99" -ngl 99; else echo "| -ngl 99 | does not fit ($((model_bytes >> 20)) MiB > $((mem >> 20)) MiB) | | | | |"; fi
for n in $splits; do
  [ "$n" -le "$n_layer" ] || continue
  row "-ngl 99 --n-cpu-moe $n" -ngl 99 --n-cpu-moe "$n"
done

if [ "${TIER_PAIRS:-1}" != 0 ]; then
  echo
  echo "== the VRAM expert tier against static placement (bench/gpu_tier_bench.sh, issue 23) (at ${SECONDS} s)"
  BIN=$bin PAIRS=${TIER_PAIRS:-1} DEVICE=$device OUT=$out/tier bash bench/gpu_tier_bench.sh "$model" ||
    echo "(the tier benchmark failed: see $out/tier)"
fi

if [ "${PROFILE:-1}" != 0 ] && [ "$model_bytes" -lt "$mem" ]; then
  echo
  echo "== where the time goes at -ngl 99 (MOETIER_GPU_PROFILE=1; gpu/vulkan/step_profile.h) (at ${SECONDS} s)"
  python3 -c 'import json; print(json.dumps(list(range(100, 116))))' > "$out/prompt16.json"
  for what in "decode: a 16-token prompt, then 64 tokens|$out/prompt16.json|64|0" \
              "prefill: $prefill tokens, then 1|$out/prompt.json|1|0" \
              "decode with every layer's experts on the CPU (--n-cpu-moe $n_layer)|$out/prompt16.json|64|$n_layer"; do
    IFS='|' read -r title prompt n cpu_moe <<< "$what"
    echo "-- $title"
    MOETIER_GPU_PROFILE=1 "$bin" run -m "$model" --experts resident --tokens "$prompt" -n "$n" --temp 0 -ngl 99 \
      --n-cpu-moe "$cpu_moe" --device "$device" 2>&1 | grep -E '^(gpu profile|prefill:)' || echo "(the profiled run failed)"
  done
fi
