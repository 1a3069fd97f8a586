// Vector kernels of attention over the KV cache (Highway, dispatched at run time like the matmul kernels), for
// the `group` query heads of one token that share a KV head (grouped-query attention: n_head / n_head_kv heads;
// 1 without it): their scores against a range of cached key rows, and their weighted sums of the cached value
// rows. F16 rows (the default cache, converted with F16C/NEON where the CPU has it) and F32 rows.
//
// One call per (token, KV head) reads each cached row once for all its query heads, where a call per head and
// row read it group times (8 for Qwen3-30B-A3B and gpt-oss, from L3 or DRAM once a layer's cache outgrows L2)
// and paid a dispatch per row. Qwen3-30B-A3B shape at -t 2, a 2048-token prompt then 32 tokens, one run each:
// prefill 11.0 -> 16.6 tok/s, decode 3.95 -> 5.66 tok/s; a 512-token prompt, two alternating runs each: prefill
// 16.3-16.9 -> 21.4-23.5 tok/s.
//
// The sums run in float32 lanes: a score is two interleaved chains of vector multiply-adds, then the lanes' sum
// and the scalar tail; a weighted sum is one multiply-add per row and element, in row order. So results differ
// from a sequential sum only by association (each product and conversion is exact or correctly rounded), and a
// head's result does not depend on `group` or on the other heads.
#pragma once

#include <cstdint>

namespace moetier::quant::kernels {

// scores[g * ld_s + j] = scale * sum_{i < n} q[g * n + i] * k[j * ld_kv + i], for g < group and j0 <= j < j1.
// q: [group, n] float; k: cached key rows, row j at k + j * ld_kv, binary16 (as uint16_t bits) or float.
void attn_scores_f16(const float* q, int64_t group, int64_t n, const uint16_t* k, int64_t ld_kv, int64_t j0,
                     int64_t j1, float scale, float* scores, int64_t ld_s);
void attn_scores_f32(const float* q, int64_t group, int64_t n, const float* k, int64_t ld_kv, int64_t j0, int64_t j1,
                     float scale, float* scores, int64_t ld_s);

// o[g * n + i] = sum_{j0 <= j < j1} p[g * ld_s + j] * v[j * ld_kv + i] (in order of j), for g < group, i < n.
// p: [group, ld_s] weights (softmax probabilities); v: cached value rows as k above; o: [group, n], overwritten.
void attn_values_f16(const float* p, int64_t group, int64_t ld_s, const uint16_t* v, int64_t ld_kv, int64_t j0,
                     int64_t j1, int64_t n, float* o);
void attn_values_f32(const float* p, int64_t group, int64_t ld_s, const float* v, int64_t ld_kv, int64_t j0,
                     int64_t j1, int64_t n, float* o);

// s[j] = e^(s[j] - m) / (sum_{j' < n} e^(s[j'] - m) + e^(sink - m)) for j < n, m the maximum of the scores and
// the sink: the softmax of one head's scores in place, with gpt-oss's attention sink (a logit with no value row;
// -infinity for none). e^x is hwy/contrib/math's Exp (max error 1 ULP against std::exp); the sum runs in float32
// lanes, so its error is that of an n-term sum (n >= 1, or a finite sink).
void attn_softmax(float* s, int64_t n, float sink);

}  // namespace moetier::quant::kernels
