#!/usr/bin/env bash
# Installs the Debian 12 packages moetier builds and tests with. Idempotent: packages already present are
# skipped, so a second run costs one dpkg query. Needs root (or sudo) only when something is missing.
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libpcre2-dev libutf8proc-dev liburing-dev libhwy-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev chromium
  clang-14 libclang-rt-14-dev lld-14 jq fio
  libvulkan-dev glslc spirv-tools mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node and npm run the server tests' official `openai` client (installed by the test from the npm registry). The
# machines may have them from elsewhere (NodeSource), whose packages conflict with Debian's: only absent ones come
# from Debian.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
