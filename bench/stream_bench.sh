#!/usr/bin/env bash
# End-to-end benchmark of expert streaming past RAM (see bench/README.md). Needs root: it creates a memory
# cgroup (v1 or v2) to cap the run's memory, page cache included, and drops the page cache before every run.
#
#   bench/stream_bench.sh [MODEL.gguf | PRESET]
#     MODEL     default build/bench/qwen3-30b-a3b-Q4_K_M.gguf (written with `moetier synth` if missing, ~17 GB);
#     PRESET    qwen3-30b-a3b, gemma-4-26b-a4b or qwen3.5-35b-a3b: build/bench/PRESET-Q4_K_M.gguf, written with
#               `moetier synth --preset PRESET --type Q4_K_M` if missing (~17, ~17, ~21 GB); gpt-oss-120b:
#               build/bench/gpt-oss-120b-MXFP4.gguf (--type MXFP4, ~63 GB: regime 2, below)
#   env: RUNS (3) runs per configuration, TOKENS (32) decode tokens, CAP_GIB (8) memory cap, THREADS (2),
#        PROMPT ("Once upon a time"), FIO_SECONDS (30; 0 skips fio), CONFIGS (all: "stream2000 stream4000
#        stream4000warm streamauto mmapcapped resident"; a subset runs only those, and the table lists only those;
#        stream4000ahead, not in the default set, is stream4000 with the next-layer prefetch, --expert-prefetch next,
#        and adds a table of its guesses beside stream4000's stall),
#        BW_SECONDS (5; 0 skips): before each configuration, fio samples the drive's direct random-read
#        bandwidth (4 MiB reads, 4 lanes, as the expert store reads) for this long; the decode table gives each
#        streamed result as a % of the I/O bound those samples set (median MiB/s / MiB read per token),
#        ROUTE (unset: the model's router; a route_trace v1 file: every decode run replays its routing,
#        --route-replay); prefill512 and prefill512mmap run a prompt of 512 token ids (bench tokens, not a trace's
#        routing) and one generated token, streamed (cache 4000 MiB) and through mmap, both capped;
#        densemmap, densewarm and denseanon (not in the default set) stream the experts with each --dense-weights
#        policy: regime 2, a model about five times the cap (gpt-oss-120b under CAP_GIB=12), where the dense
#        weights compete with the expert cache for memory; their table gives the load time, the first 5 decode
#        tokens' mean wall time, decode tok/s and major page faults per decode token
#
# Every run starts cold (MOETIER_HEAT=off: no heat profile kept or read) except stream4000warm's: one unmeasured
# run of stream4000 writes a heat profile, and each measured run warm-starts its cache from that same profile
# (--cache-warm FILE) before the first token: a profile of the very prompt and routing it then runs, so the best
# case; its warm-start read (up to the cache's 4000 MiB, in the log) is not in the table's MiB or tok/s.
# Prints a markdown table: per configuration, the median over RUNS of decode tok/s, MiB read per decode token,
# cache hit rate and peak RSS, and of tok/s and hit rate over the first 16 and 32 decode tokens (the warm-up); then
# the drive's direct random-read bandwidth (fio) at 1, 2 and 4 lanes.
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
  gpt-oss-120b | */gpt-oss-120b-MXFP4.gguf) preset=gpt-oss-120b; model=build/bench/gpt-oss-120b-MXFP4.gguf ;;
  */gemma-4-26b-a4b-Q4_K_M.gguf) preset=gemma-4-26b-a4b ;;
  */qwen3.5-35b-a3b-Q4_K_M.gguf) preset=qwen3.5-35b-a3b ;;
  *) preset=qwen3-30b-a3b ;;
esac
runs=${RUNS:-3}; tokens=${TOKENS:-32}; cap_gib=${CAP_GIB:-8}; threads=${THREADS:-2}
out=build/bench/stream; mkdir -p "$out"
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  type=Q4_K_M; [ "$preset" = gpt-oss-120b ] && type=MXFP4
  "$bin" synth --preset "$preset" --type "$type" -o "$model"
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
prompt_args=(-p "$prompt"); n_predict=$tokens
export MOETIER_HEAT=off
route=()
[ -n "${ROUTE:-}" ] && route=(--route-replay "$ROUTE")
# The drive's direct random-read bandwidth, sampled between configurations (MiB/s, one line per sample).
bw_file=$out/drive_bw.txt
: > "$bw_file"
sample_bw() {
  [ "${BW_SECONDS:-5}" = 0 ] && return 0
  fio --name=bw --filename="$model" --readonly --rw=randread --bs=4M --direct=1 --ioengine=psync --numjobs=4 \
      --group_reporting --time_based --runtime="${BW_SECONDS:-5}" --output-format=terse 2>/dev/null |
    awk -F';' '{printf "%.0f\n", $7 / 1024}' >> "$bw_file" || true
}
# run NAME CAPPED ARGS...: RUNS cold runs; each leaves its metrics CSV in $out/NAME.RUN.csv
run_config() {
  local name=$1 capped=$2; shift 2
  sample_bw
  for r in $(seq 1 "$runs"); do
    sync; echo 3 > /proc/sys/vm/drop_caches
    local csv=$out/$name.$r.csv
    rm -f "$csv"  # a failed run must not leave an earlier run's figures behind
    if [ "$capped" = 1 ]; then
      reset_peak
      sh -c 'echo $$ > '"$cg"'/cgroup.procs; exec "$@"' sh "$bin" run -m "$model" "${prompt_args[@]}" -n "$n_predict" --temp 0 \
        -t "$threads" --csv "$csv" "${route[@]}" "$@" > "$out/$name.$r.log" 2>&1 ||
        { echo "$name run $r failed: see $out/$name.$r.log" >&2; continue; }
    else
      "$bin" run -m "$model" "${prompt_args[@]}" -n "$n_predict" --temp 0 -t "$threads" --csv "$csv" "${route[@]}" "$@" \
        > "$out/$name.$r.log" 2>&1 || { echo "$name run $r failed: see $out/$name.$r.log" >&2; continue; }
    fi
  done
}
# the median of the numbers on stdin, one per line ("-" when there are none)
mid() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
# median KEY over the summary lines of this invocation's runs of NAME (1 .. RUNS; files of earlier, longer
# invocations are not mixed in)
median() {
  local name=$1 key=$2
  for r in $(seq 1 "$runs"); do
    local f=$out/$name.$r.csv
    [ -f "$f" ] || continue
    { grep '^# summary' "$f" || true; } | tr ' ' '\n' | sed -n "s/^$key=//p"
  done | mid
}
# window NAME N: "tok/s hit%" over the first N decode rows of each run's CSV, each the median over the runs
window() {
  local name=$1 n=$2 col
  for col in 1 2; do
    for r in $(seq 1 "$runs"); do
      local f=$out/$name.$r.csv
      [ -f "$f" ] || continue
      awk -F, -v n="$n" '
        /^#/ { next }
        $1 == "step" { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        $c["phase"] == "decode" && k < n { ++k; ms += $c["wall_ms"]; h += $c["hits"]; m += $c["misses"] }
        END { if (k) printf "%.2f %.1f\n", k * 1000 / ms, (h + m) ? 100 * h / (h + m) : 0 }' "$f"
    done | cut -d' ' -f"$col" | sort -g | awk '{v[NR]=$1} END {if (NR) printf "%s ", v[int((NR+1)/2)]; else printf "- "}'
  done
}
# decode_mib NAME: MiB read per decode token over the decode rows (prefill's reads left out), median over the runs
decode_mib() {
  local name=$1
  for r in $(seq 1 "$runs"); do
    local f=$out/$name.$r.csv
    [ -f "$f" ] || continue
    awk -F, '/^#/ { next } $1 == "step" { for (i = 1; i <= NF; ++i) c[$i] = i; next }
      $c["phase"] == "decode" { ++k; b += $c["read_bytes"] } END { if (k) printf "%.3f\n", b / 1048576 / k }' "$f"
  done | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'
}
drive_bw=
row() {
  local name=$1 label=$2
  local dtok dms rb hit rss w16 w32
  dtok=$(median "$name" decode_tokens); dms=$(median "$name" decode_ms)
  rb=$(median "$name" read_bytes); hit=$(median "$name" hit_pct); rss=$(median "$name" peak_rss_mib)
  w16=$(window "$name" 16); w32=$(window "$name" 32)
  awk -v l="$label" -v t="$dtok" -v ms="$dms" -v rb="$rb" -v h="$hit" -v rss="$rss" -v n="$tokens" \
      -v w16="$w16" -v w32="$w32" -v bw="$drive_bw" -v dmib="$(decode_mib "$name")" 'BEGIN {
    tps = (ms > 0) ? t * 1000 / ms : 0; mib = (n > 0 && rb != "-") ? rb / 1048576 / n : 0;
    split(w16, a, " "); split(w32, b, " ");
    bound = (bw > 0 && dmib > 0) ? sprintf("%.1f (%.0f%%)", bw / dmib, 100 * tps * dmib / bw) : "-";
    printf "| %s | %.2f | %.1f | %s | %s | %s / %s | %s / %s | %s |\n", l, tps, mib, h, rss, a[1], a[2], b[1], b[2],
      bound }'
}

all="stream2000 stream4000 stream4000warm streamauto mmapcapped resident prefill512 prefill512mmap"
regime2="densemmap densewarm denseanon"
extra="stream4000ahead"
configs=${CONFIGS:-$all}
for c in $configs; do
  case " $all $regime2 $extra " in
    *" $c "*) ;;
    *) echo "stream_bench: unknown configuration '$c' in CONFIGS ($all $regime2 $extra)" >&2
       exit 1 ;;
  esac
done
selected() { case " $configs " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
selected stream2000 && run_config stream2000 1 --experts stream --cache-mb 2000
selected stream4000 && run_config stream4000 1 --experts stream --cache-mb 4000
selected stream4000ahead && run_config stream4000ahead 1 --experts stream --cache-mb 4000 --expert-prefetch next
if selected stream4000warm; then
  heat=$out/stream4000warm.heat.json
  rm -f "$heat"
  (runs=1; run_config stream4000warm-profile 1 --experts stream --cache-mb 4000 --heat "$heat")
  [ -f "$heat" ] || { echo "stream_bench: the profiling run wrote no heat profile: see $out/stream4000warm-profile.1.log" >&2; exit 1; }
  run_config stream4000warm 1 --experts stream --cache-mb 4000 --cache-warm "$heat"
fi
selected streamauto && run_config streamauto 1 --experts stream --cache-mb auto
selected mmapcapped && run_config mmapcapped 1 --experts resident
for policy in mmap warm anon; do
  selected dense$policy && run_config dense$policy 1 --experts stream --cache-mb auto --dense-weights $policy
done
selected resident && run_config resident 0 --experts resident
if selected prefill512 || selected prefill512mmap; then
  # 512 token ids spread over the vocabulary's first 100000 (every model here has more), one forward chunk (-b 512).
  awk 'BEGIN { printf "["; for (i = 0; i < 512; ++i) printf "%s%d", i ? "," : "", 1000 + (i * 7919) % 100000; print "]" }' \
    > "$out/prompt512.json"
  saved_route=("${route[@]}"); route=(); prompt_args=(--tokens "$out/prompt512.json"); n_predict=1
  selected prefill512 && run_config prefill512 1 --experts stream --cache-mb 4000 -c 1024 -b 512
  selected prefill512mmap && run_config prefill512mmap 1 --experts resident -c 1024 -b 512
  route=("${saved_route[@]}"); prompt_args=(-p "$prompt"); n_predict=$tokens
fi

echo "model: $model, $tokens decode tokens, -t $threads, median of $runs runs (page cache dropped before each), cap" \
     "${cap_gib} GiB${ROUTE:+, routing replayed from $ROUTE}"
[ -s "$bw_file" ] && echo "drive: direct random 4 MiB reads at 4 lanes, sampled before each configuration: $(tr '\n' ' ' < "$bw_file")MiB/s" \
  "(the I/O bound below: their median over the MiB read per decode token)"
echo
drive_bw=$(sort -g "$bw_file" | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}')
decode_configs=0
for c in stream2000 stream4000 stream4000ahead stream4000warm streamauto mmapcapped resident; do
  selected $c && decode_configs=1
done
if [ $decode_configs = 1 ]; then
  echo "| configuration | decode tok/s | MiB read / token (whole run) | hit % | peak RSS MiB | first 16: tok/s / hit % | first 32: tok/s / hit % | I/O bound tok/s: drive MiB/s / decode MiB per token (% reached) |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
fi
selected stream2000 && row stream2000 "stream, cache 2000 MiB, capped"
selected stream4000 && row stream4000 "stream, cache 4000 MiB, capped"
selected stream4000ahead && row stream4000ahead "stream, cache 4000 MiB, capped, next-layer prefetch"
selected stream4000warm && row stream4000warm "stream, cache 4000 MiB, capped, warm start (profile of the same run)"
selected streamauto && row streamauto "stream, cache auto, capped"
selected mmapcapped && row mmapcapped "resident (mmap), capped"
selected resident && row resident "resident, uncapped"
# ahead_row NAME LABEL: the next-layer prefetch's guesses and the decode's I/O stall, medians over the runs
ahead_row() {
  local name=$1 label=$2 r f
  for r in $(seq 1 "$runs"); do
    f=$out/$name.$r.csv
    [ -f "$f" ] || continue
    awk -F, '/^#/ { next } $1 == "step" { for (i = 1; i <= NF; ++i) c[$i] = i; next }
      $c["phase"] == "decode" { ++k; st += $c["stall_ms"]; ms += $c["wall_ms"]
        if ("ahead_guesses" in c && $c["ahead_guesses"] >= 0) {
          g += $c["ahead_guesses"]; ok += $c["ahead_right"]; rd += $c["ahead_reads"]; u += $c["ahead_used"]
          ab += $c["ahead_bytes"] } }
      END { if (k) printf "%.1f %.1f %s %s %s\n", st / k, ms / k, g ? sprintf("%.1f", 100 * ok / g) : "-",
              rd ? sprintf("%.1f", 100 * u / rd) : "-", g ? sprintf("%.1f", ab / 1048576 / k) : "-" }' "$f"
  done > "$out/$name.ahead.txt"
  local col vals=()
  for col in 1 2 3 4 5; do vals+=("$(cut -d' ' -f"$col" "$out/$name.ahead.txt" | mid)"); done
  echo "| $label | ${vals[0]} | ${vals[1]} | ${vals[2]} | ${vals[3]} | ${vals[4]} |"
}
if selected stream4000ahead; then
  echo
  echo "| decode, cache 4000 MiB, capped | I/O stall ms / token | wall ms / token | guesses right % | read ahead used % | MiB read ahead / token |"
  echo "| --- | --- | --- | --- | --- | --- |"
  selected stream4000 && ahead_row stream4000 "no prefetch"
  ahead_row stream4000ahead "next-layer prefetch"
fi
prefill_row() {
  local name=$1 label=$2 pt pms rb
  pt=$(median "$name" prefill_tokens); pms=$(median "$name" prefill_ms); rb=$(median "$name" read_bytes)
  awk -v l="$label" -v t="$pt" -v ms="$pms" -v rb="$rb" 'BEGIN {
    printf "| %s | %.1f | %s |\n", l, (ms > 0) ? t * 1000 / ms : 0, (rb != "-" && rb > 0) ? sprintf("%.0f", rb / 1048576) : "- (page cache)" }'
}
if selected prefill512 || selected prefill512mmap; then
  echo
  echo "| prefill of 512 tokens, capped | prefill tok/s | MiB read by the expert store |"
  echo "| --- | --- | --- |"
  selected prefill512 && prefill_row prefill512 "stream, cache 4000 MiB"
  selected prefill512mmap && prefill_row prefill512mmap "resident (mmap)"
fi

# regime_row NAME: the dense-weights policy's load, first 5 decode tokens, decode rate and major faults, medians
regime_row() {
  local name=$1 load first5 flt dtok dms rss
  local ok=()  # the runs that left a metrics CSV (a failed run left none)
  for r in $(seq 1 "$runs"); do [ -f "$out/$name.$r.csv" ] && ok+=("$r"); done
  load=$(for r in "${ok[@]}"; do sed -n 's/.*, loaded in \([0-9.]*\) s$/\1/p' "$out/$name.$r.log" | tail -1; done | mid)
  first5=$(for r in "${ok[@]}"; do
      awk -F, '/^#/ { next } $1 == "step" { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        $c["phase"] == "decode" && k < 5 { ++k; ms += $c["wall_ms"] } END { if (k) printf "%.0f\n", ms / k }' "$out/$name.$r.csv"
    done | mid)
  flt=$(for r in "${ok[@]}"; do
      awk -F, '/^#/ { next } $1 == "step" { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        $c["phase"] == "decode" { ++k; f += $c["majflt"] } END { if (k) printf "%.1f\n", f / k }' "$out/$name.$r.csv"
    done | mid)
  dtok=$(median "$name" decode_tokens); dms=$(median "$name" decode_ms); rss=$(median "$name" peak_rss_mib)
  awk -v l="$2" -v load="$load" -v f5="$first5" -v t="$dtok" -v ms="$dms" -v flt="$flt" -v rss="$rss" \
      -v mib="$(decode_mib "$name")" 'BEGIN {
    printf "| %s | %s | %s | %.2f | %s | %.0f | %s |\n", l, load, f5, (ms > 0) ? t * 1000 / ms : 0, flt, mib, rss }'
}
if selected densemmap || selected densewarm || selected denseanon; then
  echo
  echo "| dense weights (experts streamed, cache auto, capped) | load s | first 5 decode tokens: mean ms | decode tok/s | major faults / decode token | MiB read / decode token | peak RSS MiB |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  selected densemmap && regime_row densemmap "mmap (page cache)"
  selected densewarm && regime_row densewarm "warm (one sequential read at load)"
  selected denseanon && regime_row denseanon "anon (direct I/O into anonymous memory)"
fi

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
