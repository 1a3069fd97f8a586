// Scalar reference quantizers, float -> packed blocks (layouts: quant/blocks.h).
//
// Two kinds, for two uses:
//  * Q8_0 and Q8_K, exact ports of ggml's round-to-nearest reference quantizers (Q8_0 is also a weight format;
//    the engine's own activation quantizer, with the oracle engine's bfloat16-scale blocks of 32, is
//    kernels::quantize_q8_row in quant/kernels/int8_kernels.h):
//      Q8_0 as quantize_row_q8_0_ref: d = amax / 127 (stored fp16), q = roundf(x / d) (half away from zero),
//           computed with the float32 d before it is rounded to fp16;
//      Q8_K as quantize_row_q8_K_ref: d = -max / 127 where max is the signed element of largest magnitude (float32
//           d, not fp16), q = min(127, round-half-even(x * (-127 / max))), plus the 16 block sums.
//  * Weight formats, for tests and for synthesising models (`moetier synth`), NOT for model quality:
//      Q4_0, Q4_1, Q5_0, Q5_1, MXFP4 follow ggml's *_ref round-to-nearest quantizers (MXFP4: shared exponent
//           floor(log2(amax)) - 2, nearest E2M1 code, saturating to +-6 * 2^(e-127) above it);
//      Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS use a simple, valid but non-optimal scheme (no error search):
//           sub-block scales (and mins) are rounded *up* so every element is in range, then each element goes to
//           the nearest level. The per-element error is then at most half a sub-block step (K formats), or half
//           the widest gap of the IQ4 grid, which the tests check. ggml's quantizers, which search scales to
//           minimise squared error, give better models; real model files come from those.
// Inputs must be finite; magnitudes above ~6e4 * step overflow the fp16 scales (results are then meaningless).
#pragma once

#include <cstdint>

#include "quant/ggml_type.h"

namespace moetier::quant {

// True if quantize_row_ref supports t.
bool can_quantize_ref(GgmlType t);

// Quantize n floats (a multiple of the type's block size) into row_bytes(t, n) bytes at dst.
// Throws moetier::Error naming the type if there is no reference quantizer for it or n is not whole blocks.
void quantize_row_ref(GgmlType t, const float* src, void* dst, int64_t n);

}  // namespace moetier::quant
