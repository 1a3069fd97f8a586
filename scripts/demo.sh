#!/usr/bin/env bash
# The README's first command: installs the packages, builds moetier, writes a small synthetic MoE model and
# generates from it with its experts streamed from the file through an expert cache about a quarter of their
# size, then prints the run summary.
# Synthetic weights are random, so the generated text is meaningless by construction: the demo shows the
# engine (placement, cache, reads, hit rate, tok/s), not a model. For a real model:
#   build/release/moetier run -m /path/to/model.gguf -p "Hello" --experts auto
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
mkdir -p build/demo
model=build/demo/tiny-synth.gguf
build/release/moetier synth --preset tiny --type Q4_K_M -q -o "$model"
echo "--- inspect (abridged)"
build/release/moetier inspect "$model" | grep -E "^(model|architecture|tensors):|^expert slices"
echo "--- run: experts streamed through an 8 MiB cache (the experts total about 29 MiB)"
build/release/moetier run -m "$model" --experts stream --cache-mb 8 -p "Once upon a time" -n 32 --temp 0
echo "--- (synthetic weights: the text above is meaningless; point -m at a real GGUF for real text)"
