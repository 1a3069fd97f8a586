// The Highway targets every run-time-dispatched file compiles (quant kernels, GLU): one set, so that
// compiled_targets() (matmul_kernels.h) names the targets of all of them and the tests that pin each target in
// turn (hwy::SetSupportedTargetsForTest) run every file's code for it. Include first, before any Highway header.
//   SSSE3: adds nothing over SSE4 here; skipped for compile time.
//   SVE, SVE2, SVE_256, SVE2_128 (aarch64): the portable kernels keep per-token accumulators in arrays of vectors,
//   which a sizeless SVE vector type cannot be; the hot integer products on aarch64 are the NEON dot-product
//   kernels (int8_arm.cpp), which every SVE CPU also runs, so Highway's NEON target is the portable code there.
//   AVX3_DL (AVX512-VNNI, Ice Lake and later Xeons, Zen 4): the integer kernels' vpdpbusd paths
//   (int8_avx2-inl.h, int8_vnni512-inl.h); Highway 1.0 compiles it only when asked (HWY_WANT_AVX3_DL), and with the VEX-only
//   "avxvnni", so VNNI there is EVEX inline assembly (DpBusd), not intrinsics.
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
