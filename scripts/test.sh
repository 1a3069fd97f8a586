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

# Disk: the stages together need about 6 GiB beside the packages (build trees ~3.5 GiB, each stage's scratch models
# under build/<preset>/test-tmp up to ~1 GiB). Each stage's scratch is removed once it passed. A test that fails on
# "No space left on device" is the machine's disk, not the code: the line below says how much there was.
free_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "test: $((free_kib / 1024)) MiB free on $(df -P . | awk 'NR == 2 { print $6 }') at the start"
if [ "$free_kib" -lt $((6 * 1024 * 1024)) ]; then
  echo "test: warning: under 6 GiB free; tests that write scratch models may fail with ENOSPC" >&2
fi

echo "== Release build (with Vulkan) and all tests"
cmake --preset release -DMOETIER_VULKAN=ON >/dev/null
cmake --build --preset release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 600
rm -rf build/release/test-tmp

if [ "${MOETIER_NO_ASAN:-0}" != 1 ]; then
  echo "== ASan + UBSan build and unit tests"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 900 -LE slow
  rm -rf build/asan/test-tmp
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
