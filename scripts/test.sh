#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs the packages, builds, runs every test (unit,
# oracle, CLI, and the server's over HTTP with the `openai` npm client, fetched from the npm registry, and headless
# Chromium) in Release with the Vulkan backend (its GPU tests on Mesa's lavapipe under the Khronos validation
# layer), runs the unit tests again under ASan + UBSan in a build without Vulkan (whose own tests check that the
# backend says it is absent), then runs every libFuzzer target (GGUF header, tokenizers, route trace, metrics CSV,
# --tokens JSON) for a bounded time, then cross-builds for aarch64 and runs its tests under qemu-user
# (scripts/test-arm64.sh). Exit status non-zero on any failure.
#   MOETIER_FUZZ_SECONDS   fuzzing time per target (default 30: about 2.5 min for the five, plus their build;
#                          0 skips the fuzz stage)
#   MOETIER_NO_ASAN=1      skip the sanitizer stage (quicker local iterations; CI always runs it)
#   MOETIER_NO_ARM64=1     skip the aarch64 stage (scripts/test-arm64.sh; CI always runs it)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d ../shared/oracle ]; then
  echo "test: the shared test data was not found at $(cd .. && pwd)/shared (oracle/, tokenizer/, traces/)." >&2
  echo "test: clone moetier beside it so that ../shared resolves, as CI does." >&2
  exit 1
fi

bash scripts/setup-deps.sh
jobs=$(nproc)

echo "== Release build (with Vulkan) and all tests"
cmake --preset release -DMOETIER_VULKAN=ON >/dev/null
cmake --build --preset release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 600

if [ "${MOETIER_NO_ASAN:-0}" != 1 ]; then
  echo "== ASan + UBSan build and unit tests"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 900 -LE slow
fi

fuzz_seconds=${MOETIER_FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" != 0 ]; then
  echo "== Fuzzing every libFuzzer target for ${fuzz_seconds} s each"
  bash scripts/fuzz.sh "$fuzz_seconds"
fi
if [ "${MOETIER_NO_ARM64:-0}" != 1 ]; then
  echo "== aarch64 cross build and its tests under qemu-user"
  bash scripts/test-arm64.sh
fi
echo "test: all stages passed"
