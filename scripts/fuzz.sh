#!/usr/bin/env bash
# Fuzzes the GGUF header parser with libFuzzer for SECONDS (default 60) and exits non-zero on any finding.
#
# Configures and builds the `fuzz` preset (clang-14, ASan + UBSan + libFuzzer), seeds build/fuzz/corpus with the
# first 64 KiB of every shared GGUF file (whole headers for the small models, truncated ones for big vocabularies),
# then runs the fuzzer. Crash, leak and timeout inputs are written to build/fuzz/artifacts/.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="build/fuzz"
shared="$root/../shared"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_gguf_header

corpus="$build/corpus"
artifacts="$build/artifacts"
mkdir -p "$corpus" "$artifacts"
seeds=0
for f in "$shared"/oracle/models/*.gguf "$shared"/tokenizer/*.gguf; do
  [ -f "$f" ] || continue
  head -c 65536 "$f" >"$corpus/seed-$(basename "$f" .gguf)"
  seeds=$((seeds + 1))
done
echo "fuzz.sh: $seeds seed headers in $corpus, running for ${seconds}s"

# -rss_limit_mb bounds memory per input: the parser must never allocate far beyond the input size.
# -timeout flags any single input that takes longer than 10 s (a hang).
"$build/fuzz/fuzz_gguf_header" "$corpus" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/"
