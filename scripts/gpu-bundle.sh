#!/usr/bin/env bash
# Packs the GPU check for a machine that has a GPU but not the build tools (no glslc, no Debian libraries: a lent
# GPU machine, a colleague's PC), from a Release build made here with the Vulkan backend:
#   build/gpu-bundle/bundle.tar.gz  the moetier and test_gpu binaries, the shared libraries they load (from this
#                                   machine), Debian's Vulkan loader, the Khronos validation layer, jq and
#                                   vulkaninfo, and a subset of ../shared/oracle that fits a 64 MiB transfer (the
#                                   models the GPU tests name, one per architecture and format family)
#   build/gpu-bundle/run.sh         run there from the repository root (the source tree must be there too:
#                                   gpu-check.sh and nothing else of it is used): unpacks, puts the oracle subset
#                                   at ../shared and this build at the path the test binary was built with, and runs
#                                   scripts/gpu-check.sh with PREBUILT=1. Its output also goes to $OUT when set.
# The binaries need glibc >= 2.34 there; an older one makes run.sh run them through this machine's loader.
#   env: BUILD (build/release, built with -DMOETIER_VULKAN=ON), DEST (build/gpu-bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/release}
dest=${DEST:-build/gpu-bundle}
shared=../shared/oracle
for f in "$build/moetier" "$build/tests/test_gpu"; do
  [ -x "$f" ] || { echo "gpu-bundle: $f is missing: build with cmake --preset release -DMOETIER_VULKAN=ON" >&2; exit 1; }
done
for f in /usr/lib/x86_64-linux-gnu/libvulkan.so.1 /usr/bin/jq /usr/bin/vulkaninfo \
         /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so; do
  [ -e "$f" ] || { echo "gpu-bundle: $f is missing: run bash scripts/setup-deps.sh (and apt install vulkan-tools)" >&2; exit 1; }
done

stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/rt" "$stage/layer" "$stage/build/tests" "$stage/shared/oracle"
cp "$build/moetier" "$stage/build/"
cp "$build/tests/test_gpu" "$stage/build/tests/"
cp /usr/bin/jq /usr/bin/vulkaninfo "$stage/bin/"
# The libraries the programs load, glibc and the C++ runtime apart (rt/: used only where the machine's are older).
for exe in "$build/moetier" "$build/tests/test_gpu" /usr/bin/jq /usr/bin/vulkaninfo /usr/lib/x86_64-linux-gnu/libvulkan.so.1; do
  ldd "$exe" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$stage/rt/" ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
cp -L /lib64/ld-linux-x86-64.so.2 "$stage/rt/"
cp -L /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$stage/lib/"
cp /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so "$stage/layer/"
jq '.layer.library_path = "./libVkLayer_khronos_validation.so"' \
  /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json > "$stage/layer/VkLayer_khronos_validation.json"

# The oracle subset: the four models tests/gpu name (-ngl 2 cases and the CLI test), a dense F16 and BF16, and the
# two architectures on the per-product path; each with its references.
models="stories260K stories260K-F16 tiny-mixtral-Q4_0 tiny-qwen3moe-Q4_K_M tiny-gptoss-MXFP4 micro-qwen3moe-F16"
incoming="gemma4/tiny-gemma4-Q4_K_M qwen35moe/tiny-qwen35moe-Q4_K_M"
cp "$shared/README.md" "$stage/shared/oracle/"
copy_model() {  # <oracle root relative to $shared> <model>
  local from=$shared/$1 to=$stage/shared/oracle/$1
  mkdir -p "$to/models" "$to/ref"
  cp "$from/models/$2.gguf" "$to/models/"
  cp "$from/ref/$2".* "$to/ref/"
}
for m in $models; do copy_model . "$m"; done
for m in $incoming; do copy_model "incoming/${m%%/*}" "${m#*/}"; done
# The routing trace bench/gpu_tier_bench.sh replays.
mkdir -p "$stage/shared/traces/bigmoeonedge-2026-07-15"
cp ../shared/traces/bigmoeonedge-2026-07-15/qwen.route.csv "$stage/shared/traces/bigmoeonedge-2026-07-15/"

# libglvnd: NVIDIA's Vulkan driver (libGLX_nvidia.so.0) loads its dispatch library, which GPU container images
# often lack; the packages are unpacked into the bundle there, never into the machine's system folders.
mkdir -p "$stage/deb"
(cd "$stage/deb" && apt-get download -q libglvnd0 libglx0 libgl1 libegl1 libgles2 libopengl0 >/dev/null) ||
  { echo "gpu-bundle: apt-get download of libglvnd's packages failed (it needs Debian's package registry)" >&2; exit 1; }
# The checkout the binaries were built in: the test binary finds ../shared and its scratch space from it.
built_at=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
[ -n "$built_at" ] || { echo "gpu-bundle: no CMAKE_HOME_DIRECTORY in $build/CMakeCache.txt" >&2; exit 1; }
rel_build=$(realpath --relative-to="$built_at" "$build")  # the binaries' place there, as here (the CLI tests' path)

mkdir -p "$dest"
tar -C "$stage" -czf "$dest/bundle.tar.gz" .
{ echo '#!/usr/bin/env bash'; echo "default_built_at='$built_at'"; echo "build='$rel_build'"; } > "$dest/run.sh"
cat >> "$dest/run.sh" <<'EOF'
# Unpacks bundle.tar.gz (scripts/gpu-bundle.sh) and runs scripts/gpu-check.sh on the prebuilt binaries.
# Run from the repository root. env: as gpu-check.sh (SPLITS, TOKENS, PREFILL, DEVICE, SKIP_TESTS), and
# BUILT_AT: the repository path the binaries were built in (their tests find ../shared and scratch space from it;
# default: the build's own, written above by gpu-bundle.sh).
set -uo pipefail
root=$PWD
bundle=$root/build/gpu-bundle
u=$bundle/unpacked
rm -rf "$u"; mkdir -p "$u"; tar -C "$u" -xzf "$bundle/bundle.tar.gz" || exit 1
built_at=${BUILT_AT:-$default_built_at}
mkdir -p "$build/tests"
cp "$u/build/moetier" "$build/"; cp "$u/build/tests/test_gpu" "$build/tests/"
# The test binary reads $built_at/../shared and runs and writes under $built_at/$build.
if [ "$(readlink -f "$built_at")" != "$root" ]; then
  [ -e "$built_at" ] && { echo "run.sh: $built_at exists and is not this checkout" >&2; exit 1; }
  mkdir -p "$(dirname "$built_at")"; ln -s "$root" "$built_at"
fi
[ -e "$root/../shared" ] || ln -s "$u/shared" "$root/../shared"
for deb in "$u"/deb/*.deb; do dpkg -x "$deb" "$u/glvnd"; done
export PATH=$u/bin:$PATH VK_LAYER_PATH=$u/layer
export LD_LIBRARY_PATH=$u/lib:$u/glvnd/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The NVIDIA container images keep the driver's manifest outside the loader's default folders.
if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$f" ] && export VK_DRIVER_FILES=$f && break
  done
fi
# The driver's own libraries (libGLX_nvidia and what it loads) where the container image keeps them.
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
command -v nvidia-smi >/dev/null && nvidia-smi -L
echo "== machine: $(uname -r), $(ldd --version 2>&1 | head -1), $(nproc) CPUs, VK_DRIVER_FILES=${VK_DRIVER_FILES:-default}"
# glibc older than the build machine's: run the programs through the bundled loader and C library (its
# --library-path replaces LD_LIBRARY_PATH, so it takes the whole of it: the bundle's and the driver's folders).
if ! "$build/moetier" --version >/dev/null 2>&1; then
  "$build/moetier" --version 2>&1 | head -3
  echo "== running through the bundled glibc"
  for exe in "$build/moetier" "$build/tests/test_gpu" "$u/bin/jq" "$u/bin/vulkaninfo"; do
    mv "$exe" "$exe.real"
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$u/rt/ld-linux-x86-64.so.2" "$u/rt:$LD_LIBRARY_PATH" \
      "$(readlink -f "$exe.real")" > "$exe"
    chmod +x "$exe"
  done
fi
PREBUILT=1 BUILD=$build bash scripts/gpu-check.sh 2>&1 | tee ${OUT:+"$OUT/gpu-check.log"}
EOF
chmod +x "$dest/run.sh"
du -sh "$dest/bundle.tar.gz"
