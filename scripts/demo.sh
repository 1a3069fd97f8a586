#!/usr/bin/env bash
# The README's first command: installs the packages, builds moetier, writes a small synthetic MoE model and
# describes it. Synthetic weights are random: they exist to exercise the engine, not to say anything.
# To look at a real model instead: build/release/moetier inspect -m /path/to/model.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
mkdir -p build/demo
build/release/moetier synth --preset tiny --type Q4_K_M --alignment 4096 -o build/demo/tiny-synth.gguf
build/release/moetier inspect build/demo/tiny-synth.gguf
