#!/usr/bin/env bash
# End-to-end benchmark of expert streaming past RAM (see bench/README.md). Needs root: it creates a memory
# cgroup (v1 or v2) to cap the run's memory, page cache included, and drops the page cache before every run.
#
#   bench/stream_bench.sh [MODEL.gguf | PRESET]
#     MODEL     default build/bench/qwen3-30b-a3b-Q4_K_M.gguf (written with `moetier synth` if missing, ~17 GB);
#     PRESET    qwen3-30b-a3b, gemma-4-26b-a4b or qwen3.5-35b-a3b: build/bench/PRESET-Q4_K_M.gguf, written with
#               `moetier synth --preset PRESET --type Q4_K_M` if missing (~17, ~17, ~21 GB)
#   env: RUNS (3) runs per configuration, TOKENS (32) decode tokens, CAP_GIB (8) memory cap, THREADS (2),
#        PROMPT ("Once upon a time"), FIO_SECONDS (30; 0 skips fio), CONFIGS (all: "stream2000 stream4000
#        streamauto mmapcapped resident"; a subset runs only those, and the table lists only those)
#
# Prints a markdown table: per configuration, the median over RUNS of decode tok/s, MiB read per decode token,
# cache hit rate and peak RSS; then the drive's direct random-read bandwidth (fio) at 1, 2 and 4 lanes.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "stream_bench: needs root (memory cgroup, drop_caches)" >&2; exit 1; }
bin=build/release/moetier
[ -x "$bin" ] || { echo "stream_bench: build first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
model=${1:-build/bench/qwen3-30b-a3b-Q4_K_M.gguf}
# The preset a missing model is written with: a bare preset name stands for build/bench/PRESET-Q4_K_M.gguf; any
# other missing path gets qwen3-30b-a3b.
case $model in
  qwen3-30b-a3b | gemma-4-26b-a4b | qwen3.5-35b-a3b) preset=$model; model=build/bench/$preset-Q4_K_M.gguf ;;
  */gemma-4-26b-a4b-Q4_K_M.gguf) preset=gemma-4-26b-a4b ;;
  */qwen3.5-35b-a3b-Q4_K_M.gguf) preset=qwen3.5-35b-a3b ;;
  *) preset=qwen3-30b-a3b ;;
esac
runs=${RUNS:-3}; tokens=${TOKENS:-32}; cap_gib=${CAP_GIB:-8}; threads=${THREADS:-2}
out=build/bench/stream; mkdir -p "$out"
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$bin" synth --preset "$preset" --type Q4_K_M -o "$model"
fi

# The cgroup: v1 (memory.limit_in_bytes) or v2 (memory.max); removed on exit.
if [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/moetier-bench; mkdir -p "$cg"
  echo $((cap_gib << 30)) > "$cg/memory.limit_in_bytes"
  peak_file=$cg/memory.max_usage_in_bytes; reset_peak() { echo 0 > "$peak_file"; }
else
  cg=/sys/fs/cgroup/moetier-bench; mkdir -p "$cg"
  echo $((cap_gib << 30)) > "$cg/memory.max"
  peak_file=$cg/memory.peak; reset_peak() { :; }
fi
cleanup() { for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill "$p" 2>/dev/null || true; done; rmdir "$cg" 2>/dev/null || true; }
trap cleanup EXIT

prompt=${PROMPT:-"Once upon a time"}
# run NAME CAPPED ARGS...: RUNS cold runs; each leaves its metrics CSV in $out/NAME.RUN.csv
run_config() {
  local name=$1 capped=$2; shift 2
  for r in $(seq 1 "$runs"); do
    sync; echo 3 > /proc/sys/vm/drop_caches
    local csv=$out/$name.$r.csv
    rm -f "$csv"  # a failed run must not leave an earlier run's figures behind
    if [ "$capped" = 1 ]; then
      reset_peak
      sh -c 'echo $$ > '"$cg"'/cgroup.procs; exec "$@"' sh "$bin" run -m "$model" -p "$prompt" -n "$tokens" --temp 0 \
        -t "$threads" --csv "$csv" "$@" > "$out/$name.$r.log" 2>&1 || { echo "$name run $r failed: see $out/$name.$r.log" >&2; continue; }
    else
      "$bin" run -m "$model" -p "$prompt" -n "$tokens" --temp 0 -t "$threads" --csv "$csv" "$@" \
        > "$out/$name.$r.log" 2>&1 || { echo "$name run $r failed: see $out/$name.$r.log" >&2; continue; }
    fi
  done
}
# median KEY over the summary lines of this invocation's runs of NAME (1 .. RUNS; files of earlier, longer
# invocations are not mixed in)
median() {
  local name=$1 key=$2
  for r in $(seq 1 "$runs"); do
    local f=$out/$name.$r.csv
    [ -f "$f" ] || continue
    { grep '^# summary' "$f" || true; } | tr ' ' '\n' | sed -n "s/^$key=//p"
  done | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'
}
row() {
  local name=$1 label=$2
  local dtok dms rb hit rss
  dtok=$(median "$name" decode_tokens); dms=$(median "$name" decode_ms)
  rb=$(median "$name" read_bytes); hit=$(median "$name" hit_pct); rss=$(median "$name" peak_rss_mib)
  awk -v l="$label" -v t="$dtok" -v ms="$dms" -v rb="$rb" -v h="$hit" -v rss="$rss" -v n="$tokens" 'BEGIN {
    tps = (ms > 0) ? t * 1000 / ms : 0; mib = (n > 0 && rb != "-") ? rb / 1048576 / n : 0;
    printf "| %s | %.2f | %.1f | %s | %s |\n", l, tps, mib, h, rss }'
}

configs=${CONFIGS:-"stream2000 stream4000 streamauto mmapcapped resident"}
for c in $configs; do
  case $c in
    stream2000 | stream4000 | streamauto | mmapcapped | resident) ;;
    *) echo "stream_bench: unknown configuration '$c' in CONFIGS (stream2000 stream4000 streamauto mmapcapped resident)" >&2
       exit 1 ;;
  esac
done
selected() { case " $configs " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
selected stream2000 && run_config stream2000 1 --experts stream --cache-mb 2000
selected stream4000 && run_config stream4000 1 --experts stream --cache-mb 4000
selected streamauto && run_config streamauto 1 --experts stream --cache-mb auto
selected mmapcapped && run_config mmapcapped 1 --experts resident
selected resident && run_config resident 0 --experts resident

echo "model: $model, $tokens decode tokens, -t $threads, median of $runs cold runs, cap ${cap_gib} GiB"
echo
echo "| configuration | decode tok/s | MiB read / token (whole run) | hit % | peak RSS MiB |"
echo "| --- | --- | --- | --- | --- |"
selected stream2000 && row stream2000 "stream, cache 2000 MiB, capped"
selected stream4000 && row stream4000 "stream, cache 4000 MiB, capped"
selected streamauto && row streamauto "stream, cache auto, capped"
selected mmapcapped && row mmapcapped "resident (mmap), capped"
selected resident && row resident "resident, uncapped"

[ "${FIO_SECONDS:-30}" = 0 ] && exit 0
echo
echo "Direct random-read bandwidth of the drive holding the model (fio, ${FIO_SECONDS:-30} s each):"
for bs in 1M 4M; do
  for lanes in 1 2 4; do
    bw=$(fio --name=rr --filename="$model" --readonly --rw=randread --bs=$bs --direct=1 --ioengine=psync \
           --numjobs=$lanes --group_reporting --time_based --runtime="${FIO_SECONDS:-30}" --output-format=terse 2>/dev/null |
         awk -F';' '{printf "%.0f", $7 / 1024}')
    echo "  $bs reads, $lanes lanes: $bw MiB/s"
  done
done
