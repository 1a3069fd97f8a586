#!/usr/bin/env bash
# The aarch64 (64-bit Arm: phones, ARM laptops and servers) build and its tests, on an x86-64 Debian 12 machine:
# installs Debian's cross toolchain, the :arm64 development packages and qemu-user, cross-builds the `arm64`
# preset (Release, no Vulkan), and runs the test suite under qemu-user on emulated CPUs that differ in what the
# integer kernels dispatch on (quant/kernels/int8_arm.h):
#   max          FEAT_DotProd + FEAT_I8MM (sdot, smmla): the whole suite (oracle, streamed = resident, CLI, server)
#   neoverse-n1  FEAT_DotProd only (sdot)              : the quant tests
#   cortex-a53   neither (Highway's portable NEON)     : the quant tests
# The quant tests run every kernel variant the emulated CPU has against the scalar reference, and check that sdot
# alone and sdot with smmla give the same bits (so the oracle results of `max` hold for sdot-only CPUs); the
# narrower CPUs check that the run-time detection picks what they have. Each run prints the kernels the CPU got
# (the start log's `cpu:` line and the kernel test's list). Needs root
# (or sudo) for apt and for registering qemu with binfmt_misc, through which a test can start the CLI binary.
#   MOETIER_ARM64_CPUS   the CPU models to run (default "max neoverse-n1 cortex-a53"; the first runs everything)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d ../shared/oracle ]; then
  echo "test-arm64: the shared test data was not found at $(cd .. && pwd)/shared; clone moetier beside it." >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "test-arm64: needs root or sudo (apt, binfmt_misc)" >&2; exit 1; }
  SUDO=sudo
fi

# The cross toolchain, qemu, and every library moetier links, for arm64 (header-only ones are shared).
pkgs=(g++-aarch64-linux-gnu qemu-user-static ninja-build cmake pkg-config libcli11-dev nlohmann-json3-dev
      libfmt-dev:arm64 libspdlog-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 liburing-dev:arm64
      libhwy-dev:arm64 libxxhash-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libcpp-httplib-dev:arm64)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  need_update=1
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-arm64: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
elif [ "${need_update:-0}" = 1 ]; then
  $SUDO apt-get update -qq
fi

# binfmt_misc: lets the kernel run an aarch64 binary that a test starts (the CLI) through qemu. The entry is the
# one Debian's qemu-user-static ships for systemd-binfmt.
spawn_ok=1
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  [ -e /proc/sys/fs/binfmt_misc/register ] ||
    $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
  if [ -e /proc/sys/fs/binfmt_misc/register ]; then
    $SUDO sh -c 'cat /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register' 2>/dev/null || true
  fi
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    spawn_ok=0
    echo "test-arm64: could not register qemu-aarch64 with binfmt_misc (not root, or a container without it):" \
         "the tests that start the CLI binary (labels cli, server) are left out" >&2
  fi
fi

# qemu-user (7.2) does not emulate io_uring's system calls: the read engine's io_uring cases then check the
# fallback to the pread pool that a refused ring takes (tests/stream/io_test.cpp).
export MOETIER_TEST_NO_IO_URING=1
# qemu-user takes madvise(MADV_HUGEPAGE) without passing it to the kernel: no "hg" flag to find in smaps.
export MOETIER_TEST_NO_THP_ADVICE=1

jobs=$(nproc)
echo "== aarch64 cross build (preset arm64)"
cmake --preset arm64 >/dev/null
cmake --build --preset arm64 -j "$jobs"
echo "test-arm64: built $(readelf -h build/arm64/moetier | grep -o 'Machine:.*' | tr -s ' ')"

read -r -a cpus <<< "${MOETIER_ARM64_CPUS:-max neoverse-n1 cortex-a53}"
exclude=()
[ "$spawn_ok" = 1 ] || exclude=(-LE 'cli|server')
first=1
for cpu in "${cpus[@]}"; do
  export QEMU_CPU=$cpu
  echo "== tests under qemu-aarch64 -cpu $cpu"
  build/arm64/moetier run -m ../shared/oracle/models/tiny-qwen3moe-Q4_K_M.gguf -p hi -n 1 --temp 0 2>&1 |
    grep '^cpu:' | sed "s/^/test-arm64 ($cpu): /"
  if [ "$first" = 1 ]; then
    # Emulation is ~10-30x slower than the host: the timeout is the native suite's, scaled.
    ctest --test-dir build/arm64 --output-on-failure -j "$jobs" --timeout 1800 "${exclude[@]}"
    first=0
  else
    ctest --test-dir build/arm64 --output-on-failure -j "$jobs" --timeout 1800 -L quant "${exclude[@]}"
  fi
done
unset QEMU_CPU
echo "test-arm64: all stages passed"
