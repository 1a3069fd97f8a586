// Scalar reference dequantization: the specification every optimised kernel is tested against.
//
// Block layouts and formulas follow ggml (ggml-common.h block structs, ggml-quants.c dequantize_row_*) and, for
// MXFP4, the OCP Microscaling Formats (MX) v1.0 specification (E2M1 elements, E8M0 shared scale per 32).
// Each function evaluates the format's formula in its natural order, so results are bit-exact with ggml's.
#pragma once

#include <cstdint>

#include "quant/ggml_type.h"

namespace moetier::quant {

// Dequantize n elements (a multiple of the type's block size) from src (row_bytes(t, n) bytes) to dst.
// Throws moetier::Error naming the type if moetier has no dequantizer for it (IQ1_*, IQ2_*, IQ3_*, TQ*, ...).
void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n);

}  // namespace moetier::quant
