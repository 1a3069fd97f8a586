#!/usr/bin/env bash
# End-to-end speed benchmark (see bench/README.md): decode and prefill tok/s of models whose experts are resident
# (mapped, page cache warm), next to the bound that this machine's read bandwidth sets on decode.
#
#   bench/speed_bench.sh [MODEL.gguf ...]
#     MODEL     default (or MODELS="a.gguf b.gguf"): build/bench/qwen3-30b-a3b-Q4_K_M.gguf,
#               build/bench/gpt-oss-20b-MXFP4.gguf, build/bench/gemma-4-26b-a4b-Q4_K_M.gguf and
#               build/bench/qwen3.5-35b-a3b-Q4_K_M.gguf, written with `moetier synth` if missing (~17, ~12, ~17 and
#               ~21 GB)
#   env: BIN (build/release) the build holding moetier and bench/bench_matvec, RUNS (3) runs per measurement,
#        TOKENS (64) decode tokens per run, THREADS (2) compute threads (-t), PREFILL ("128 512") prompt lengths in
#        tokens, OUT (build/bench/speed) where the per-run metrics CSVs and logs go
#
# Per model, RUNS runs of `moetier run --experts resident -t THREADS` for every prompt length of PREFILL: a prompt
# of exactly that many token ids (--tokens; pseudo-random ids, fixed per length, run as one prefill in batches of
# -b 512), then TOKENS decode tokens (greedy). The file is read once first so the page cache is warm. Figures come
# from each run's metrics CSV (`# summary` line): prefill tok/s = prefill_tokens / prefill_ms, decode tok/s =
# decode_tokens / decode_ms (forward passes only); each is the median over its runs, decode over the runs of the
# first PREFILL length.
#
# Decode is memory-bound: every token reads the dense weights (all but token_embd, a row lookup; output.weight
# included) and n_expert_used experts per MoE layer (`moetier inspect --json`: decode_read_per_token.bytes), and a
# recurrent model (qwen35moe) reads its state and writes it back (2 x decode_read_per_token.recurrent_state_bytes:
# 2 x 62.8 MiB at Qwen3.5-35B-A3B's shapes, past any L3). The machine's read bandwidth at the same thread count over
# those bytes is the decode bound. bench_matvec's
# ReadBandwidth measures it with 1, 2 and 8 streams per thread (one sequential read; the one-token kernels' two;
# the most found): once before each decode-measuring run (those of the first PREFILL length) and once after the
# last, so the medians span the same minutes as the runs on a host whose bandwidth drifts. The bound is the
# 1-stream read (a plain sequential read, as the issue's goal was set). Decode's % of it pairs each run with the
# read of its own minutes (the mean of the samples just before and after it: other tenants come and go within
# minutes) and takes the median over the runs; the table gives the same for the 2- and 8-stream reads.
#
# The other bound is the kernels' own speed. bench_matvec's MatvecHot gives each weight type's one-token product
# rate on one cache-resident copy at the same thread count (the rate when memory does not bound it; median of 3
# repetitions, measured once before the models). A token reads decode_read_per_token.by_type bytes of each type,
# so it cannot run faster than 1 / sum over types of bytes / rate: the compute ceiling. Types without a MatvecHot
# figure (F32 norms and biases, F16 tables: a few MiB) and the recurrent state's traffic are charged at the
# 1-stream read bandwidth. Where the runs
# held dense matrices repacked (quant/repack.h; the run log's "repack:" line), those bytes (dense_by_type) take the
# repacked layout's rate, MatvecHot/TYPE.rows16; where they held the routed experts repacked too (the line names
# "the routed experts'"), every byte of such a type does.
#
# Prints one markdown table: model, threads, MiB read per token, read GB/s (1 / 2 / 8 streams), bound tok/s,
# compute ceiling tok/s, decode tok/s, % of the bound (and of the 2- and 8-stream reads), % of the ceiling, which
# of the two is lower (bound by kernels or memory), and prefill tok/s per prompt length.
set -euo pipefail
cd "$(dirname "$0")/.."
bindir=${BIN:-build/release}
bin=$bindir/moetier
bench=$bindir/bench/bench_matvec
[ -x "$bench" ] || bench=$bindir/bench_matvec
[ -x "$bin" ] || { echo "speed_bench: no $bin: build first (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }
[ -x "$bench" ] || { echo "speed_bench: no bench_matvec under $bindir (needs Google Benchmark: scripts/setup-deps.sh)" >&2; exit 1; }
command -v jq > /dev/null || { echo "speed_bench: needs jq (scripts/setup-deps.sh installs it)" >&2; exit 1; }
runs=${RUNS:-3}; tokens=${TOKENS:-64}; threads=${THREADS:-2}; prefill=${PREFILL:-"128 512"}
out=${OUT:-build/bench/speed}; mkdir -p "$out"
read -r -a lengths <<< "$prefill"
[ "${#lengths[@]}" -gt 0 ] || { echo "speed_bench: PREFILL is empty" >&2; exit 1; }

default_qwen=build/bench/qwen3-30b-a3b-Q4_K_M.gguf
default_gptoss=build/bench/gpt-oss-20b-MXFP4.gguf
default_gemma4=build/bench/gemma-4-26b-a4b-Q4_K_M.gguf
default_qwen35=build/bench/qwen3.5-35b-a3b-Q4_K_M.gguf
if [ $# -gt 0 ]; then
  models=("$@")
elif [ -n "${MODELS:-}" ]; then
  read -r -a models <<< "$MODELS"
else
  models=("$default_qwen" "$default_gptoss" "$default_gemma4" "$default_qwen35")
fi
for m in "${models[@]}"; do
  [ -f "$m" ] && continue
  case $m in
    "$default_qwen") preset=qwen3-30b-a3b; type=Q4_K_M ;;
    "$default_gptoss") preset=gpt-oss-20b; type=MXFP4 ;;  # MXFP4 experts, Q8_0 attention and embeddings
    "$default_gemma4") preset=gemma-4-26b-a4b; type=Q4_K_M ;;
    "$default_qwen35") preset=qwen3.5-35b-a3b; type=Q4_K_M ;;
    *) echo "speed_bench: no model $m" >&2; exit 1 ;;
  esac
  mkdir -p "$(dirname "$m")"
  "$bin" synth --preset "$preset" --type "$type" -o "$m"
done

# median of the numbers on stdin (one per line); "-" when there are none
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
                                            else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# tok/s of PHASE (prefill or decode) from the `# summary` line of each CSV given, one per line
rates() {
  local phase=$1; shift
  for f in "$@"; do
    [ -f "$f" ] || continue
    { grep '^# summary' "$f" || true; } | tr ' ' '\n' |
      awk -F= -v p="$phase" '$1 == p "_tokens" {n = $2} $1 == p "_ms" {ms = $2} END {if (ms > 0) print n * 1000 / ms}'
  done
}
# N pseudo-random token ids in [0, VOCAB) as a JSON list (the same for the same N)
prompt_ids() {
  awk -v n="$1" -v v="$2" 'BEGIN {s = 12345 + n; printf "["; for (i = 0; i < n; ++i) {
    s = (s * 1103515245 + 12345) % 2147483648; printf "%s%d", (i ? "," : ""), int(s / 2147483648 * v) } print "]" }'
}
# one sample of this machine's read bandwidth at $threads threads, bytes/s, per line "STREAMS BYTES_PER_S" for 1, 2
# and 8 streams per thread
read_bandwidth() {
  MOETIER_BENCH_THREADS=$threads "$bench" --benchmark_filter="^ReadBandwidth/1GiB/$threads/[128]/real_time\$" \
    --benchmark_min_time=0.2 --benchmark_format=json 2> /dev/null |
    jq -r '.benchmarks[] | select(.run_type == "iteration") | "\(.name | split("/")[3]) \(.weights)"'
}
# per weight type "TYPE BYTES_PER_S": MatvecHot's one-token rate at $threads threads, median of 3 repetitions
hot_rates() {
  MOETIER_BENCH_THREADS=$threads "$bench" --benchmark_filter="^MatvecHot/[^/]*/768x2048/$threads/real_time\$" \
    --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json 2> /dev/null |
    jq -r '.benchmarks[] | select(.aggregate_name == "median") | "\(.name | split("/")[1]) \(.weights)"'
}
# the compute ceiling in tok/s of a token reading BY_TYPE ("TYPE BYTES" lines) with the rates of FILE, types without
# a rate at BW bytes/s ("-" when BW is unknown and such a type is read)
ceiling_of() {
  awk -v bw="$3" 'NR == FNR { rate[$1] = $2; next }
    { if ($1 in rate) t += $2 / rate[$1]; else if (bw != "-" && bw > 0) t += $2 / bw; else bad = 1 }
    END { if (bad || t <= 0) print "-"; else print 1 / t }' "$2" <(printf '%s\n' "$1")
}
# the median bandwidth of STREAMS in the samples file FILE ("-" when there is none)
bandwidth_of() { awk -v s="$1" '$1 == s {print $2}' "$2" | median; }
# per decode-measuring run (prompt length PROMPT, runs 1..$runs), its decode bytes/s (BYTES per token) over the
# mean of the STREAMS-stream samples of FILE taken just before and just after it; one per line
paired() {
  local streams=$1 samples=$2 bytes=$3 prefix=$4 r d
  for r in $(seq 1 "$runs"); do
    d=$(rates decode "$prefix.$r.csv")
    [ -n "$d" ] || continue
    awk -v s="$streams" -v r="$r" -v d="$d" -v b="$bytes" '$1 == s {n++; if (n == r || n == r + 1) {sum += $2; k++}}
      END {if (k == 2 && sum > 0) print d * b / (sum / 2)}' "$samples"
  done
}

hot=$out/hot_rates; hot_rates > "$hot"
[ -s "$hot" ] || { echo "speed_bench: bench_matvec gave no MatvecHot rate at $threads threads" >&2; exit 1; }
rows=()
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  info=$("$bin" inspect "$m" --json)
  state=$(jq -r '.decode_read_per_token.recurrent_state_bytes // 0' <<< "$info")
  bytes=$(($(jq -r '.decode_read_per_token.bytes' <<< "$info") + 2 * state))
  by_type=$(jq -r '.decode_read_per_token.by_type | to_entries[] | "\(.key) \(.value)"' <<< "$info")
  if [ "$state" -gt 0 ]; then by_type+=$'\n'"recurrent_state $((2 * state))"; fi
  dense_by_type=$(jq -r '.decode_read_per_token.dense_by_type | to_entries[] | "\(.key) \(.value)"' <<< "$info")
  # A tied token_embd (the output matrix too) is read whole by decode and counted dense, but never repacked
  # (tensor_binder.cpp): its bytes keep the file layout's rate.
  tied_type=""; tied_bytes=0
  if [ "$(jq -r '.decode_read_per_token.token_embd_is_output' <<< "$info")" = true ]; then
    tied_type=$(jq -r '.decode_read_per_token.token_embd_type' <<< "$info")
    tied_bytes=$(jq -r '.decode_read_per_token.token_embd_bytes' <<< "$info")
    dense_by_type=$(awk -v t="$tied_type" -v e="$tied_bytes" '$1 == t { $2 -= e } { print }' <<< "$dense_by_type")
  fi
  vocab=$(jq -r '.tokenizer.n_vocab // empty' <<< "$info")
  if [ -z "$vocab" ] || [ "$vocab" -le 0 ]; then echo "speed_bench: $m has no vocabulary" >&2; exit 1; fi
  cat "$m" > /dev/null  # warm the page cache: resident runs read the mapping
  samples=$out/$name.bandwidth; : > "$samples"
  for n in "${lengths[@]}"; do
    prompt_ids "$n" "$vocab" > "$out/$name.prompt-$n.json"
    for r in $(seq 1 "$runs"); do
      if [ "$n" = "${lengths[0]}" ]; then read_bandwidth >> "$samples"; fi
      csv=$out/$name.p$n.$r.csv; rm -f "$csv"
      "$bin" run -m "$m" --tokens "$out/$name.prompt-$n.json" -n $((tokens + 1)) --temp 0 --experts resident \
        -t "$threads" -c $((n + tokens + 16)) --csv "$csv" > "$out/$name.p$n.$r.log" 2>&1 ||
        echo "speed_bench: $name, prompt $n, run $r failed: see $out/$name.p$n.$r.log" >&2
    done
    if [ "$n" = "${lengths[0]}" ]; then read_bandwidth >> "$samples"; fi
  done
  bw=$(bandwidth_of 1 "$samples"); bw2=$(bandwidth_of 2 "$samples"); bw8=$(bandwidth_of 8 "$samples")
  decode=$(rates decode "$out/$name.p${lengths[0]}".*.csv | median)
  first=$out/$name.p${lengths[0]}
  f1=$(paired 1 "$samples" "$bytes" "$first" | median); f2=$(paired 2 "$samples" "$bytes" "$first" | median)
  f8=$(paired 8 "$samples" "$bytes" "$first" | median)
  # The dense matrices the runs held repacked (their log's "repack: N matrices (...) ...") count at their layout's
  # rate (MatvecHot/TYPE.rows16), and the routed experts too when it says so; the rest of each type at the file
  # layout's.
  repacked=0; grep -q "repack: [0-9]" "$first.1.log" && repacked=1
  experts_repacked=0; grep -q "repack: [0-9].*the routed experts' among them" "$first.1.log" && experts_repacked=1
  split_types=$(awk -v rp="$repacked" -v rx="$experts_repacked" -v tt="$tied_type" -v tb="$tied_bytes" '
    FILENAME == ARGV[1] { rate[$1] = 1; next }
    FILENAME == ARGV[2] { dense[$1] = $2; next }
    { d = rx ? $2 - ($1 == tt ? tb : 0) : ($1 in dense) ? dense[$1] : 0
      if (rp && (($1 ".rows16") in rate)) { print $1 ".rows16", d; print $1, $2 - d } else print $1, $2 }' \
    "$hot" <(printf '%s\n' "$dense_by_type") <(printf '%s\n' "$by_type"))
  ceil=$(ceiling_of "$split_types" "$hot" "$bw")
  prefills=""
  for n in "${lengths[@]}"; do prefills+=" | $(rates prefill "$out/$name.p$n".*.csv | median | awk '{v = $1; if (v == "-") print v; else printf "%.1f", v}')"; done
  rows+=("$(awk -v name="$name" -v t="$threads" -v b="$bytes" -v bw="$bw" -v bw2="$bw2" -v bw8="$bw8" -v d="$decode" \
    -v f1="$f1" -v f2="$f2" -v f8="$f8" -v c="$ceil" -v pf="$prefills" '
    function gbs(x) { return x == "-" ? "-" : sprintf("%.2f", x / 1e9) }
    function pct(x) { return x == "-" ? "-" : sprintf("%.0f%%", 100 * x) }
    BEGIN {
      bnd = (bw != "-" && b > 0) ? sprintf("%.2f", bw / b) : "-"
      dec = d != "-" ? sprintf("%.2f", d) : "-"
      cl = c != "-" ? sprintf("%.2f", c) : "-"
      cp = (c != "-" && d != "-") ? pct(d / c) : "-"
      lower = (c == "-" || bnd == "-") ? "-" : (c < bw / b ? "kernels" : "memory")
      printf "| %s | %d | %.1f | %s / %s / %s | %s | %s | %s | %s (%s / %s) | %s | %s%s |", name, t, b / 1048576, gbs(bw),
             gbs(bw2), gbs(bw8), bnd, cl, dec, pct(f1), pct(f2), pct(f8), cp, lower, pf }')")
done

echo "experts resident (mapped, page cache warm), -t $threads; decode: median of $runs runs of $tokens tokens after a" \
     "${lengths[0]}-token prompt; prefill: median of $runs runs per prompt length; read bandwidth: bench_matvec" \
     "ReadBandwidth at $threads threads with 1 / 2 / 8 streams per thread, median of $((runs + 1)) samples taken" \
     "between the decode runs; bound: the 1-stream read over the bytes per token (weights, and a recurrent" \
     "model's state read and written back); % of bound: the median over the" \
     "decode runs of each run's bytes/s against the mean read of the samples just before and after it; compute" \
     "ceiling: bench_matvec MatvecHot at $threads threads per weight type over the bytes of each type a token reads" \
     "(the matrices a run repacked, dense and routed experts, at their layout's rate, MatvecHot/TYPE.rows16)"
echo
header="| model | threads | MiB read / token | read GB/s (1 / 2 / 8 streams) | bound tok/s | compute ceiling tok/s"
header+=" | decode tok/s | % of bound (of 2 / 8 streams) | % of ceiling | bound by"
sep="| --- | --- | --- | --- | --- | --- | --- | --- | --- | ---"
for n in "${lengths[@]}"; do header+=" | prefill tok/s ($n)"; sep+=" | ---"; done
echo "$header |"
echo "$sep |"
printf '%s\n' "${rows[@]}"
