// Fused dequantize-and-dot kernels behind quant::matmul (Highway, one binary for every x86/Arm CPU: the best
// target the CPU supports is chosen at run time by HWY_DYNAMIC_DISPATCH).
//
// Semantics ("exact"): each weight block is decoded in registers / a stack buffer of one block (at most 256
// floats) to exactly the values of the scalar reference dequantizer (quant/dequant_ref.h), then multiplied by
// the float activations and accumulated in float32 vector lanes. Results therefore differ from the reference
// matmul only by the association of the float sums (see tests/quant/kernels_test.cpp for the bound).
// Batches: tokens are taken four at a time per pass over a weight row, so a row (at most a few KiB) is read
// from memory once per batch and decoded once per four tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/ggml_type.h"

namespace moetier::quant::kernels {

// How far ahead, in bytes of each stream it reads, a one-token (decode) kernel asks for weights with a software
// prefetch (block_bytes-inl.h, PrefetchAhead, says why 4096). bench_matvec's ReadBandwidth reads the same way.
inline constexpr size_t kPrefetchAhead = 4096;

// True if matmul_rows supports weights of type t (every type with a reference dequantizer that matmul sees).
bool has_kernel(GgmlType t);

// For r in [r0, r1) and t < n_tok: y[t * y_stride + r] = sum_c w[r, c] * x[t * cols + c].
// w: rows of `row_bytes` bytes of type `type` starting at `w` ([rows, cols]); x: [n_tok, cols].
// cols must be whole blocks of the type (any value for F32/F16/BF16). Thread-safe (no shared state).
void matmul_rows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t cols, const float* x, int64_t n_tok,
                 float* y, int64_t y_stride, int64_t r0, int64_t r1);

// The Highway targets compiled into the kernels that this CPU supports (for tests: pass each to
// hwy::SetSupportedTargetsForTest to run the kernels on it).
std::vector<int64_t> compiled_targets();

}  // namespace moetier::quant::kernels
