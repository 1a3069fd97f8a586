// Random but valid quantized blocks: random quant bits with block scales chosen so the dequantized values have
// roughly the requested standard deviation and are always finite. Much faster than quantizing random floats,
// which is what lets `synth` write tens of GB at disk speed. Block layouts: see quant/dequant_ref.h.
#pragma once

#include <cstdint>

#include "quant/ggml_type.h"
#include "synth/rng.h"

namespace moetier::synth {

// Fill dst with n_elems elements of type t (n_elems a multiple of the block size; dst holds
// quant::row_bytes(t, n_elems) bytes). Values have a standard deviation near `std` (within ~2x; the exact
// spread depends on the format's scale structure) and zero mean where the format has an offset term.
// Throws moetier::Error for types synth cannot produce.
void fill_random(quant::GgmlType t, uint8_t* dst, int64_t n_elems, float std, Rng& rng);

// Whether fill_random supports t.
bool can_fill(quant::GgmlType t);

}  // namespace moetier::synth
