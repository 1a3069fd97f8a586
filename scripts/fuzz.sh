#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 30) and exits non-zero on any finding.
#
# Configures and builds the `fuzz` preset (clang-14, ASan + UBSan + libFuzzer), seeds a corpus per target under
# build/fuzz/corpus/<target>/ from the shared test data and fuzz/seeds/, then runs the targets one after another:
#   fuzz_gguf_header   the GGUF header parser; seeds: the first 64 KiB of every shared GGUF file
#   fuzz_tokenizer     bytes -> ids -> text on every shared vocabulary (MOETIER_FUZZ_VOCABS); seeds: the
#                      tokenizer test strings, each behind the byte that selects its vocab
#   fuzz_route_trace   the route_trace v1 reader and writer; seeds: fuzz/seeds/route_trace and the first rows
#                      of the shared traces
#   fuzz_metrics_csv   the metrics-CSV reader and `report`'s page; seeds: fuzz/seeds/metrics_csv (`run --csv`)
#   fuzz_token_input   `--tokens` JSON; seeds: fuzz/seeds/token_input
#   fuzz_openai_request  `serve`'s request bodies (chat, completions, tokenize, detokenize); seeds:
#                      fuzz/seeds/openai_request
# Crash, leak, timeout and out-of-memory inputs are written to build/fuzz/artifacts/<target>/; the corpora grow
# across runs. To reproduce a finding: build/fuzz/fuzz/<target> ARTIFACT (for fuzz_tokenizer, with the
# MOETIER_FUZZ_VOCABS this script prints, since the first byte picks the vocab by its place in that list).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default: every target)
set -euo pipefail

seconds="${1:-30}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="build/fuzz"
shared="$root/../shared"
all_targets=(fuzz_gguf_header fuzz_tokenizer fuzz_route_trace fuzz_metrics_csv fuzz_token_input fuzz_openai_request)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${targets[@]}"

# The tokenizer fuzzer's vocabularies, in the order its first input byte indexes them.
vocabs=("$shared"/tokenizer/*.gguf "$shared"/oracle/models/stories260K.gguf)
MOETIER_FUZZ_VOCABS="$(IFS=:; echo "${vocabs[*]}")"
export MOETIER_FUZZ_VOCABS

# seed TARGET: fills build/fuzz/corpus/TARGET with its seeds (files already there are kept).
seed() {
  local dir="$build/corpus/$1" f i n
  mkdir -p "$dir"
  case "$1" in
    fuzz_gguf_header)
      for f in "$shared"/oracle/models/*.gguf "$shared"/tokenizer/*.gguf; do
        head -c 65536 "$f" >"$dir/seed-$(basename "$f" .gguf)"
      done
      ;;
    fuzz_tokenizer)
      local split
      split="$(mktemp -d)"
      for i in "${!vocabs[@]}"; do
        local base="${vocabs[$i]%.gguf}"
        [[ "$base" == */tokenizer/* ]] || base="$shared/tokenizer/qwen3-vocab"  # stories260K: borrow strings
        for f in "$base".gguf.inp "$base".extra.inp; do
          [ -f "$f" ] || continue
          rm -f "$split"/*
          # One file per test string (strings are separated by a line __ggml_vocab_test__).
          awk -v out="$split/s" 'BEGIN { RS = "\n__ggml_vocab_test__\n"; ORS = "" }
                                 { print > (out NR); close(out NR) }' "$f"
          n=0
          for s in "$split"/s*; do
            { printf "\\x$(printf %02x "$i")"; cat "$s"; } >"$dir/seed-$i-$(basename "$f" .inp)-$((n += 1))"
          done
        done
      done
      rm -rf "$split"
      ;;
    fuzz_route_trace)
      cp fuzz/seeds/route_trace/* "$dir/"
      for f in "$shared"/traces/*/*.route.csv; do
        # The header and the first rows: whole traces are megabytes, far above -max_len.
        head -c 6000 "$f" >"$dir/seed-$(basename "$f" .route.csv)"
      done
      ;;
    fuzz_metrics_csv) cp fuzz/seeds/metrics_csv/* "$dir/" ;;
    fuzz_token_input) cp fuzz/seeds/token_input/* "$dir/" ;;
    fuzz_openai_request) cp fuzz/seeds/openai_request/* "$dir/" ;;
    *) echo "fuzz.sh: unknown target '$1' (targets: ${all_targets[*]})" >&2; exit 2 ;;
  esac
}

# Per-target input size bound, bytes: large enough for the seeds, small enough that one slow input shows as a
# timeout rather than a long run. The tokenizer's 4 KiB makes a quadratic case (e.g. in the split regexes) take
# seconds, which -timeout reports.
max_len() {
  case "$1" in
    fuzz_gguf_header) echo 65536 ;;
    fuzz_tokenizer) echo 4096 ;;
    *) echo 8192 ;;
  esac
}

echo "fuzz.sh: MOETIER_FUZZ_VOCABS=$MOETIER_FUZZ_VOCABS"
failed=()
for t in "${targets[@]}"; do
  seed "$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$artifacts"
  echo "== fuzz.sh: $t for ${seconds}s ($(find "$build/corpus/$t" -type f | wc -l) corpus files)"
  # -rss_limit_mb bounds memory per input: no reader may allocate far beyond its input's size.
  # -timeout flags any single input that takes longer than 10 s (a hang).
  if ! "$build/fuzz/$t" "$build/corpus/$t" -max_len="$(max_len "$t")" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/"; then
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]} (inputs in $build/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: no findings in ${targets[*]}"
