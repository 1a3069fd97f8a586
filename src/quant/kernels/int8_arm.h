// Arm (aarch64) integer products with the Armv8 dot-product extensions, chosen at run time from the kernel's
// HWCAP bits (getauxval): FEAT_DotProd's sdot (16 int8 products into four int32 lanes per instruction) for every
// product, and FEAT_I8MM's smmla (a 2x8 by 8x2 int8 matrix product, 32 products per instruction) for products of
// several tokens (prefill), two weight rows by two tokens at a time. CPUs without FEAT_DotProd take Highway's
// portable kernels (int8_kernels.cpp), as do other architectures, where these functions do nothing.
//
// The arithmetic is the portable kernels' (int8_kernels.h): per block, the exact int32 sum of weight code times
// integer sub-block scale times activation code; then, per weight row and token, one float multiply-add of that
// sum by d_w * d_x (and one for the min term of Q2_K/Q4_K/Q5_K, dmin_w * d_x times the exact sum of mins times
// 16-element code sums; Q4_1/Q5_1: m_w * d_x times the block's code sum). sdot and smmla give the same block sums,
// and every (row, token) takes the same float steps in the same order, so a product's result is the same bits with
// or without FEAT_I8MM, whatever the number of tokens beside it (tests/quant/arm_kernels_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"
#include "quant/kernels/int8_kernels.h"

namespace moetier::quant::kernels::arm {

inline constexpr unsigned kArmDotProd = 1u;  // FEAT_DotProd: sdot
inline constexpr unsigned kArmI8mm = 2u;     // FEAT_I8MM: smmla (used only together with FEAT_DotProd)
inline constexpr unsigned kArmAllFeatures = kArmDotProd | kArmI8mm;

// FEAT_DotProd and FEAT_I8MM as this CPU reports them (0 on other architectures), limited by
// limit_features_for_test.
unsigned features();
// Tests: the features used become features() & mask (kArmAllFeatures restores what the CPU has).
void limit_features_for_test(unsigned mask);

// matmul_rows_q8 (int8_kernels.h) when the CPU has FEAT_DotProd: returns false (and computes nothing) otherwise.
bool matmul_rows(GgmlType type, const uint8_t* w, size_t row_bytes, const Q8Rows& x, int64_t n_tok, float* y,
                 int64_t y_stride, int64_t r0, int64_t r1);

}  // namespace moetier::quant::kernels::arm
