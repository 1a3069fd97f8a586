// Matrix-vector products (one token, the decode step) of every weight type at the shapes of the target models,
// with the weight bytes read per second as the figure of merit: decode is memory-bound, so the ratio to the
// machine's read bandwidth (BM_ReadBandwidth, same binary, same threads) says how close a kernel is to the limit.
//
// Shapes are (rows, cols) of the stored matrix, cols = GGUF ne[0]: Qwen3-30B-A3B's ffn_gate_exps / ffn_up_exps
// are 768 x 2048 per expert, ffn_down_exps 2048 x 768, attention 4096 <-> 2048, output 151936 x 2048; gpt-oss
// uses 2880 x 2880. Weights are random valid blocks (finite, moderate scales), so timings match real data.
// Run: bench_matvec --benchmark_min_time=0.2 (MOETIER_BENCH_THREADS=N adds an N-thread read bandwidth run;
// MOETIER_BENCH_TARGET=AVX2 runs the AVX2 kernels on an AVX-512 CPU: select_target)
#include <benchmark/benchmark.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "quant/fp16.h"
#include "quant/ggml_type.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/kernels/matmul_kernels.h"
#include "quant/kernels/vec_kernels.h"
#include "quant/matmul.h"
#include "quant/repack.h"
#include "util/anon_memory.h"
#include "util/thread_pool.h"

namespace {

using moetier::quant::GgmlType;
namespace quant = moetier::quant;

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Byte offsets of the fp16 scales in a block (quant/blocks.h); overwritten so no scale is Inf/NaN/subnormal.
std::vector<size_t> fp16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
      return {0};
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

std::vector<uint8_t> random_weights(GgmlType t, int64_t rows, int64_t cols) {
  const size_t bytes = quant::row_bytes(t, cols) * static_cast<size_t>(rows);
  std::vector<uint8_t> m(bytes);
  uint64_t s = 42;
  const auto& tr = quant::traits(t);
  if (tr.block_size == 1) {  // float types: values in [-1, 1)
    const size_t n = static_cast<size_t>(rows * cols);
    for (size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(static_cast<int64_t>(splitmix(s) % 2001) - 1000) / 1000.0f;
      if (t == GgmlType::F32) std::memcpy(m.data() + 4 * i, &v, 4);
      const uint16_t h = t == GgmlType::F16 ? quant::fp32_to_fp16(v) : quant::fp32_to_bf16(v);
      if (t != GgmlType::F32) std::memcpy(m.data() + 2 * i, &h, 2);
    }
    return m;
  }
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t r = splitmix(s);
    std::memcpy(m.data() + i, &r, 8);
  }
  const auto fields = fp16_fields(t);
  const uint16_t scale = quant::fp32_to_fp16(0.01f);
  for (size_t b = 0; b < bytes; b += tr.type_size) {
    for (size_t off : fields) std::memcpy(m.data() + b + off, &scale, 2);
    if (t == GgmlType::MXFP4) m[b] = 120;
  }
  return m;
}

// The weights in `layout` (the GGUF bytes as they are, or repacked).
std::vector<uint8_t> repacked(std::vector<uint8_t> w, GgmlType t, int64_t rows, int64_t cols,
                              quant::WeightLayout layout) {
  if (layout == quant::WeightLayout::gguf) return w;
  std::vector<uint8_t> out(w.size());
  quant::repack_rows16(t, w.data(), quant::row_bytes(t, cols), cols, 0, rows / quant::kRows16, out.data());
  return out;
}

// Bytes of weights that do not fit in the caches: four times the L3 the C library reports, at least 128 MiB.
size_t cold_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max<size_t>(size_t{128} << 20, l3 > 0 ? 4 * static_cast<size_t>(l3) : 0);
}

moetier::util::ThreadPool& pool(int threads) {
  static std::map<int, std::unique_ptr<moetier::util::ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<moetier::util::ThreadPool>(threads);
  return *p;
}

// Each iteration multiplies the next of several copies of the matrix, together at least four times the last-level
// cache (and 128 MiB), so the weights come from DRAM as a model's experts do, not from cache (a 2-vCPU Xeon slice
// may see a 300 MiB L3).
// hot: one copy, multiplied again and again, so it stays in cache: the kernel's compute ceiling, which must be
// well above the read bandwidth for a DRAM-bound product to reach it.
// layout rows16: the weights repacked at setup (quant/repack.h), as the engine holds its Q8_0, Q4_K, Q5_K, Q6_K, MXFP4
// and IQ4_XS matrices where this CPU has the kernels (registered only there).
void BM_Matvec(benchmark::State& state, GgmlType t, int64_t rows, int64_t cols, bool reference,
               quant::ActivationRounding rounding, bool hot, quant::WeightLayout layout) {
  const int threads = static_cast<int>(state.range(0));
  const std::vector<uint8_t> w = repacked(random_weights(t, rows, cols), t, rows, cols, layout);
  const size_t copies = hot ? 1 : std::max<size_t>(1, (cold_bytes() + w.size() - 1) / w.size());
  std::vector<uint8_t> all(w.size() * copies);  // [copies][rows, cols] of type t
  for (size_t c = 0; c < copies; ++c) std::memcpy(all.data() + c * w.size(), w.data(), w.size());
  std::vector<float> x(static_cast<size_t>(cols), 0.5f);  // [1, cols]
  for (int64_t i = 0; i < cols; ++i) x[static_cast<size_t>(i)] = 0.5f - 0.001f * static_cast<float>(i % 997);
  std::vector<float> y(static_cast<size_t>(rows));  // [1, rows]
  quant::MatmulScratch scratch(cols, 1, rounding);
  if (threads > 1) scratch.set_pool(&pool(threads));
  size_t c = 0;
  for (auto _ : state) {
    quant::WeightView view{t, all.data() + c * w.size(), rows, cols, quant::row_bytes(t, cols)};
    view.layout = layout;
    c = c + 1 == copies ? 0 : c + 1;
    if (reference) {
      quant::matmul_reference(view, x.data(), y.data(), 1, scratch);
    } else {
      quant::matmul(view, x.data(), y.data(), 1, scratch);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weights"] = benchmark::Counter(static_cast<double>(w.size()),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::OneK::kIs1000);
}

// BM_Matvec of a rows16 matrix from DRAM with the one-token kernels' software prefetch on or off
// (kernels::rows16_prefetch, which picks one per CPU), to check that choice on the host at hand: run with
// --benchmark_enable_random_interleaving so that both settings share the same minutes of a noisy host.
void BM_Rows16Prefetch(benchmark::State& state, GgmlType t, int64_t rows, int64_t cols, bool prefetch) {
  quant::kernels::set_rows16_prefetch_for_test(prefetch ? 1 : 0);
  BM_Matvec(state, t, rows, cols, false, quant::ActivationRounding::match_ggml, false, quant::WeightLayout::rows16);
  quant::kernels::set_rows16_prefetch_for_test(-1);
}

// Sum of a 1 GiB buffer (integer adds, which the compiler vectorises), split across the pool's threads like
// matmul's rows, each thread's share read as `streams` streams (its parts side by side, a cache line of each in
// turn), asking for each line kernels::kPrefetchAhead bytes on as the kernels do: the attainable read bandwidth the
// products are compared with. streams = 2 is the one-token kernels' pattern (block_bytes-inl.h, TwoStreamRows);
// 1 a plain sequential read; 8 the most found on the benchmark machines (bench/README.md).
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto streams = static_cast<size_t>(state.range(1));
  constexpr size_t kWords = (size_t{1} << 30) / 8;
  constexpr size_t kLine = 8, kAhead = moetier::quant::kernels::kPrefetchAhead / 8;  // in words
  static std::vector<uint64_t> buf(kWords, 1);  // [kWords]: 1 GiB, touched once so pages are resident
  auto& p = pool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8);  // one cache line per thread
  for (auto _ : state) {
    p.run([&](int i) {
      const size_t b = kWords * static_cast<size_t>(i) / static_cast<size_t>(threads);
      const size_t e = kWords * static_cast<size_t>(i + 1) / static_cast<size_t>(threads);
      const size_t part = (e - b) / streams / kLine * kLine;  // whole lines per stream; the rest read after
      uint64_t s = 0;
      for (size_t k = 0; k < part; k += kLine) {
        for (size_t j = 0; j < streams; ++j) {
          const uint64_t* line = buf.data() + b + j * part + k;
          __builtin_prefetch(line + kAhead);
          for (size_t w = 0; w < kLine; ++w) s += line[w];
        }
      }
      for (size_t k = b + streams * part; k < e; ++k) s += buf[k];
      sums[static_cast<size_t>(i) * 8] = s;
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["weights"] = benchmark::Counter(static_cast<double>(kWords * 8),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::OneK::kIs1000);
}

#if defined(__x86_64__)
constexpr int64_t kPeakIters = 1 << 20;

// Runs kernel(thread, out) on each of the pool's threads per benchmark iteration (out: that thread's cache line,
// where the kernel stores its sums so they are not optimised away), and reports the kernel's macs multiply-
// accumulates per thread as G multiply-accumulates per second.
template <class Kernel>
void RunMacPeak(benchmark::State& state, double macs, const Kernel& kernel) {
  const int threads = static_cast<int>(state.range(0));
  auto& p = pool(threads);
  std::vector<int32_t> sink(static_cast<size_t>(threads) * 16);  // one cache line per thread
  for (auto _ : state) {
    p.run([&](int i) { kernel(i, &sink[static_cast<size_t>(i) * 16]); });
    benchmark::DoNotOptimize(sink.data());
  }
  state.counters["macs"] = benchmark::Counter(macs * threads, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::OneK::kIs1000);
}

// The machine's 8-bit integer multiply-accumulate peak, the ceiling of prefill (compute-bound): independent
// chains of pmaddubsw (32 u8 x i8 products, pairs summed) + pmaddwd (pairs summed into int32), the instruction
// pair the AVX2 kernels spend per 32 weights and token. Reported as G multiply-accumulates per second.
void BM_Int8MacPeak(benchmark::State& state) {
  RunMacPeak(state, static_cast<double>(kPeakIters) * 8 * 32, [](int i, int32_t* out) __attribute__((target("avx2"))) {
    __m256i a = _mm256_set1_epi8(static_cast<char>(3 + i)), x = _mm256_set1_epi8(5), one = _mm256_set1_epi16(1);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (int64_t k = 0; k < kPeakIters; ++k) {
      s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(a, x), one));
      s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(x, a), one));
      s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_maddubs_epi16(a, a), one));
      s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_maddubs_epi16(x, x), one));
      s4 = _mm256_add_epi32(s4, _mm256_madd_epi16(_mm256_maddubs_epi16(one, x), one));
      s5 = _mm256_add_epi32(s5, _mm256_madd_epi16(_mm256_maddubs_epi16(one, a), one));
      s6 = _mm256_add_epi32(s6, _mm256_madd_epi16(_mm256_maddubs_epi16(a, one), one));
      s7 = _mm256_add_epi32(s7, _mm256_madd_epi16(_mm256_maddubs_epi16(x, one), one));
      asm volatile("" : "+x"(a), "+x"(x));  // opaque inputs: the multiplies cannot be hoisted out of the loop
    }
    const __m256i t = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)),
                                       _mm256_add_epi32(_mm256_add_epi32(s4, s5), _mm256_add_epi32(s6, s7)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), t);
  });
}

// The same with AVX512-VNNI, the instruction the token tiles of such CPUs spend per 64 weights and token
// (int8_vnni512-inl.h): independent chains of vpdpbusd (64 u8 x i8 products summed into 16 int32 lanes).
void BM_Int8MacPeakVnni512(benchmark::State& state) {
  constexpr int kChains = 10;  // latency 5 at two per cycle
  RunMacPeak(state, static_cast<double>(kPeakIters) * kChains * 64,
             [](int i, int32_t* out) __attribute__((target("avx512f,avx512vnni"))) {
               __m512i a = _mm512_set1_epi8(static_cast<char>(3 + i)), x = _mm512_set1_epi8(5);
               __m512i s[kChains];
               for (auto& v : s) v = _mm512_setzero_si512();
               for (int64_t k = 0; k < kPeakIters; ++k) {
                 for (auto& v : s) v = _mm512_dpbusd_epi32(v, a, x);
                 asm volatile("" : "+v"(a), "+v"(x));  // opaque inputs
               }
               __m512i t = s[0];
               for (int j = 1; j < kChains; ++j) t = _mm512_add_epi32(t, s[j]);
               _mm512_storeu_si512(out, t);
             });
}
#endif

// Prefill's products: n_tok activation rows at once (a 128-token prompt gives the attention products 128 rows
// and each routed expert ~n_tok * n_expert_used / n_expert of them, 8 for Qwen3-30B-A3B). Compute-bound, so the
// weights stay in cache (one copy); reported as G multiply-accumulates per second, to set against Int8MacPeak.
void BM_Matmul(benchmark::State& state, GgmlType t, int64_t rows, int64_t cols, int64_t n_tok,
               quant::WeightLayout layout) {
  const int threads = static_cast<int>(state.range(0));
  const std::vector<uint8_t> w = repacked(random_weights(t, rows, cols), t, rows, cols, layout);
  std::vector<float> x(static_cast<size_t>(cols * n_tok));  // [n_tok, cols]
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f - 0.001f * static_cast<float>(i % 997);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));  // [n_tok, rows]
  quant::MatmulScratch scratch(cols, n_tok, quant::ActivationRounding::match_ggml);
  if (threads > 1) scratch.set_pool(&pool(threads));
  quant::WeightView view{t, w.data(), rows, cols, quant::row_bytes(t, cols)};
  view.layout = layout;
  for (auto _ : state) {
    quant::matmul(view, x.data(), y.data(), n_tok, scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["macs"] = benchmark::Counter(static_cast<double>(rows * cols * n_tok),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::OneK::kIs1000);
}

// A MoE layer's prefill products as the engine issues them: `experts` experts' gate and up matrices (rows x cols
// each) in one matmul_groups call (which takes up to 64 groups in one pass), each expert with its own n_tok activation
// rows. Qwen3-30B-A3B: 64 experts of 768 x 2048 (113 MB of Q4_K), 8 tokens each (a 128-token prompt at top-8 of 128
// experts); gpt-oss-20b: 32 of 2880 x 2880, 16 tokens (top-4 of 32). Each iteration takes the next of several such
// sets of weights, together at least cold_bytes(), in one mapping of huge pages where the kernel gives them
// (util::map_anonymous, as the engine's repacked weights and cache slots): from DRAM, as in a long prompt's layer.
// Set against Matmul/<type>/768x2048/tok8 (one matrix, cache-resident) it says what reading the weights from DRAM
// costs the token tiles. G multiply-accumulates per second.
void BM_MoeMatmul(benchmark::State& state, GgmlType t, int64_t experts, int64_t rows, int64_t cols, int64_t n_tok,
                  quant::WeightLayout layout) {
  const int threads = static_cast<int>(state.range(0));
  const std::vector<uint8_t> one = repacked(random_weights(t, rows, cols), t, rows, cols, layout);
  const size_t set_bytes = one.size() * 2 * static_cast<size_t>(experts);
  const size_t sets = std::max<size_t>(1, (cold_bytes() + set_bytes - 1) / set_bytes);
  uint8_t* const w = moetier::util::map_anonymous(sets * set_bytes, "benchmark experts");  // [set][expert][gate, up]
  std::vector<float> x(static_cast<size_t>(experts * n_tok * cols));      // [expert][n_tok, cols]
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f - 0.001f * static_cast<float>(i % 997);
  std::vector<float> y(static_cast<size_t>(2 * experts * n_tok * rows));  // [expert][gate, up][n_tok, rows]
  const size_t n_products = sets * 2 * static_cast<size_t>(experts);
  std::vector<quant::Product> products(n_products);                                // [set][expert][gate, up]
  std::vector<quant::ProductGroup> groups(sets * static_cast<size_t>(experts));   // [set][expert]
  for (size_t p = 0; p < n_products; ++p) {
    uint8_t* at = w + p * one.size();
    std::memcpy(at, one.data(), one.size());  // distinct copies: nothing stays in cache from one to the next
    quant::WeightView view{t, at, rows, cols, quant::row_bytes(t, cols)};
    view.layout = layout;
    products[p] = {view, y.data() + static_cast<int64_t>(p) % (2 * experts) * n_tok * rows};
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t e = static_cast<int64_t>(g) % experts;
    groups[g] = {std::span<const quant::Product>(products.data() + 2 * g, 2), x.data() + e * n_tok * cols, n_tok,
                 true};
  }
  quant::MatmulScratch scratch(cols, n_tok, quant::ActivationRounding::match_ggml, experts * n_tok);
  if (threads > 1) scratch.set_pool(&pool(threads));
  size_t set = 0;
  for (auto _ : state) {
    const std::span<const quant::ProductGroup> these(groups.data() + set * static_cast<size_t>(experts),
                                                     static_cast<size_t>(experts));
    quant::matmul_groups(these, scratch);
    set = (set + 1) % sets;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  moetier::util::unmap_anonymous(w, sets * set_bytes);
  state.counters["macs"] = benchmark::Counter(static_cast<double>(2 * experts * rows * cols * n_tok),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::OneK::kIs1000);
}

// The rows16 repack of a matrix of `rows` x `cols` (quant/repack.h) at load: the scalar specification
// (quant::repack_rows16, spec) or the one the engine calls (kernels::repack_rows16: AVX-512 where the CPU has the
// rows16 kernels, fast), its groups split over the pool's threads as RepackedMatrices does. fresh: into a new
// mapping each time (util::map_anonymous, huge pages where the kernel gives them), as at load, where the kernel
// zeroes every page the copy first touches (the mapping and its unmapping are not timed); otherwise into one copy
// written before. GB/s of the matrix's bytes.
void BM_Repack(benchmark::State& state, GgmlType t, int64_t rows, int64_t cols, bool fast, bool fresh) {
  const int threads = static_cast<int>(state.range(0));
  const std::vector<uint8_t> w = random_weights(t, rows, cols);
  const size_t rb = quant::row_bytes(t, cols);
  std::vector<uint8_t> kept(fresh ? 0 : w.size(), 1);
  const int64_t groups = rows / quant::kRows16;
  for (auto _ : state) {
    uint8_t* dst = kept.data();
    if (fresh) {
      state.PauseTiming();
      dst = moetier::util::map_anonymous(w.size(), "benchmark copy");
      state.ResumeTiming();
    }
    pool(threads).run([&](int i) {
      const int64_t g0 = groups * i / threads, g1 = groups * (i + 1) / threads;
      if (fast) {
        quant::kernels::repack_rows16(t, w.data(), rb, cols, g0, g1, dst);
      } else {
        quant::repack_rows16(t, w.data(), rb, cols, g0, g1, dst);
      }
    });
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
    if (fresh) {
      state.PauseTiming();
      moetier::util::unmap_anonymous(dst, w.size());
      state.ResumeTiming();
    }
  }
  state.counters["weights"] = benchmark::Counter(static_cast<double>(w.size()),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::OneK::kIs1000);
}

// One decode token's attention over one layer's KV cache of `ctx` positions, Qwen3-30B-A3B's shape (32 query
// heads in 4 groups of 8 per KV head, head_dim 128, F16 rows): per KV head, the group's scores, then its weighted
// sums of the values (quant/kernels/vec_kernels.h; the softmax between them is left out). One thread; reported as
// GB/s of K and V rows read, to set against ReadBandwidth once the cache outgrows the caches (ctx 32768: 64 MiB).
void BM_Attention(benchmark::State& state) {
  const int64_t ctx = state.range(0), n_kv_head = 4, group = 8, hd = 128, ld = n_kv_head * hd;
  std::vector<uint16_t> k(static_cast<size_t>(ctx * ld)), v(k.size());  // [ctx, ld] each
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = quant::fp32_to_fp16(0.01f * static_cast<float>(i % 101) - 0.5f);
    v[i] = quant::fp32_to_fp16(0.02f * static_cast<float>(i % 97) - 1.0f);
  }
  std::vector<float> q(static_cast<size_t>(n_kv_head * group * hd), 0.1f);  // [n_head, hd]
  std::vector<float> scores(static_cast<size_t>(group * ctx));              // [group, ctx]
  std::vector<float> o(q.size());                                          // [n_head, hd]
  for (auto _ : state) {
    for (int64_t h = 0; h < n_kv_head; ++h) {
      quant::kernels::attn_scores_f16(q.data() + h * group * hd, group, hd, k.data() + h * hd, ld, 0, ctx, 0.088f,
                                      scores.data(), ctx);
      quant::kernels::attn_values_f16(scores.data(), group, ctx, v.data() + h * hd, ld, 0, ctx, hd,
                                      o.data() + h * group * hd);
    }
    benchmark::DoNotOptimize(o.data());
  }
  state.counters["kv"] = benchmark::Counter(static_cast<double>(2 * k.size() * sizeof(uint16_t)),
                                            benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::OneK::kIs1000);
}

struct Shape {
  int64_t rows, cols;
  const char* name;
};

// MOETIER_BENCH_TARGET=<Highway target name> (AVX2, AVX3, AVX3_DL, ...: hwy::TargetName; one of the kernels'
// compiled_targets() that this CPU runs) runs the kernels built for that target on a CPU that has a better one: the
// AVX2 kernels, which CPUs without AVX-512 take, on an AVX-512 host.
void select_target() {
  const char* env = std::getenv("MOETIER_BENCH_TARGET");
  if (env == nullptr) return;
  const std::vector<int64_t> targets = quant::kernels::compiled_targets();
  for (const int64_t t : targets) {
    if (std::strcmp(hwy::TargetName(t), env) == 0) {
      hwy::SetSupportedTargetsForTest(t);
      return;
    }
  }
  std::fprintf(stderr, "MOETIER_BENCH_TARGET=%s: not a target this build has for this CPU (", env);
  for (const int64_t t : targets) std::fprintf(stderr, " %s", hwy::TargetName(t));
  std::fprintf(stderr, " )\n");
  std::exit(2);
}

int register_all() {
  select_target();
  constexpr auto kGguf = quant::WeightLayout::gguf;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2"))
    benchmark::RegisterBenchmark("Int8MacPeak", BM_Int8MacPeak)->Arg(1)->Arg(2)->UseRealTime();
  if (__builtin_cpu_supports("avx512vnni"))
    benchmark::RegisterBenchmark("Int8MacPeak/vnni512", BM_Int8MacPeakVnni512)->Arg(1)->Arg(2)->UseRealTime();
#endif
  // ReadBandwidth/1GiB/<threads>/<streams per thread> (and MatvecHot); MOETIER_BENCH_THREADS=N adds N threads
  // (bench/speed_bench.sh measures at its -t).
  std::vector<int64_t> rb_threads = {1, 2};
  if (const char* env = std::getenv("MOETIER_BENCH_THREADS"); env != nullptr) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 2 && n <= 1024) rb_threads.push_back(n);
  }
  auto* rb = benchmark::RegisterBenchmark("ReadBandwidth/1GiB", BM_ReadBandwidth)->UseRealTime();
  for (int64_t t : rb_threads) rb->Args({t, 1})->Args({t, 2})->Args({t, 8});
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q4_0,
                            GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::Q8_0,
                            GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,   GgmlType::Q5_K,
                            GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
  const Shape shapes[] = {{2048, 768, "2048x768"},
                          {768, 2048, "768x2048"},
                          {2048, 4096, "2048x4096"},
                          {2880, 2880, "2880x2880"},
                          {151936, 2048, "151936x2048"}};
  for (GgmlType t : types) {
    for (const Shape& s : shapes) {
      if (s.cols % quant::traits(t).block_size != 0) continue;
      const bool big = s.rows > 100000;
      if (big && t != GgmlType::Q4_K && t != GgmlType::Q6_K && t != GgmlType::Q8_0) continue;
      const std::string name = "Matvec/" + std::string(quant::type_name(t)) + "/" + s.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_Matvec, t, s.rows, s.cols, false,
                                   quant::ActivationRounding::match_ggml, false, kGguf)
          ->Arg(1)->Arg(2)->UseRealTime();
    }
  }
  // The float-activation kernels (ActivationRounding::exact) and the scalar reference path, for comparison.
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::MXFP4}) {
    const std::string exact = "MatvecExact/" + std::string(quant::type_name(t)) + "/2048x4096";
    benchmark::RegisterBenchmark(exact.c_str(), BM_Matvec, t, 2048, 4096, false, quant::ActivationRounding::exact,
                                 false, kGguf)
        ->Arg(1)->Arg(2)->UseRealTime();
    const std::string name = "MatvecReference/" + std::string(quant::type_name(t)) + "/768x2048";
    benchmark::RegisterBenchmark(name.c_str(), BM_Matvec, t, 768, 2048, true, quant::ActivationRounding::exact,
                                 false, kGguf)
        ->Arg(1)->UseRealTime();
  }
  // The one-token kernels' cache-resident ceilings, for the types that carry the experts of the common mixes
  // (Q4_K_M: Q4_K, Q6_K, Q5_0 for rows 256 does not divide; Q5_K_M; IQ4_XS; gpt-oss's MXFP4 beside Q8_0).
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::IQ4_XS,
                     GgmlType::MXFP4}) {
    const std::string hot = "MatvecHot/" + std::string(quant::type_name(t)) + "/768x2048";
    auto* b = benchmark::RegisterBenchmark(hot.c_str(), BM_Matvec, t, 768, 2048, false,
                                           quant::ActivationRounding::match_ggml, true, kGguf)
                  ->UseRealTime();
    for (int64_t n : rb_threads) b->Arg(n);  // speed_bench.sh sets a run's ceiling from these at its -t
  }
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::MXFP4,
                     GgmlType::IQ4_XS}) {
    for (int64_t n_tok : {8, 12, 64, 128}) {  // 64: a routed expert's share of a 512-token prompt (gpt-oss-20b)
      const std::string name = "Matmul/" + std::string(quant::type_name(t)) + "/768x2048/tok" + std::to_string(n_tok);
      benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t, 768, 2048, n_tok, kGguf)->Arg(1)->Arg(2)->UseRealTime();
    }
  }
  // The rows16 layout where this CPU reads it (TYPE.rows16 in the names): the same products from repacked weights.
  constexpr auto kRows16 = quant::WeightLayout::rows16;
  const auto match = quant::ActivationRounding::match_ggml;
  for (GgmlType t :
       {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::IQ4_XS}) {
    if (!quant::kernels::has_rows16_kernel(t)) continue;
    const std::string type = std::string(quant::type_name(t)) + ".rows16/";
    for (const Shape& s : shapes) {
      if (s.cols % quant::traits(t).block_size != 0) continue;
      const std::string name = "Matvec/" + type + s.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_Matvec, t, s.rows, s.cols, false, match, false, kRows16)
          ->Arg(1)->Arg(2)->UseRealTime();
    }
    const std::string hot = "MatvecHot/" + type + "768x2048";
    auto* b = benchmark::RegisterBenchmark(hot.c_str(), BM_Matvec, t, 768, 2048, false, match, true, kRows16)
                  ->UseRealTime();
    for (int64_t n : rb_threads) b->Arg(n);
    for (int64_t n_tok : {8, 12, 64, 128}) {
      const std::string name = "Matmul/" + type + "768x2048/tok" + std::to_string(n_tok);
      benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t, 768, 2048, n_tok, kRows16)
          ->Arg(1)->Arg(2)->UseRealTime();
    }
  }
  // A MoE layer's prefill from DRAM (BM_MoeMatmul), both layouts: Qwen3-30B-A3B's expert types at its shape and
  // share of a 128-token prompt (tok8) and of a 512-token one (tok32), gpt-oss-20b's MXFP4 at its own (tok16, tok64).
  struct MoeShape {
    GgmlType type;
    int64_t experts, rows, cols, tok[2];
  };
  for (const MoeShape& m :
       {MoeShape{GgmlType::Q4_K, 64, 768, 2048, {8, 32}}, MoeShape{GgmlType::Q6_K, 64, 768, 2048, {8, 32}},
        MoeShape{GgmlType::MXFP4, 32, 2880, 2880, {16, 64}}}) {
    for (const auto layout : {kGguf, kRows16}) {
      if (layout == kRows16 && !quant::kernels::has_rows16_kernel(m.type)) continue;
      for (const int64_t n_tok : m.tok) {
        const std::string name = "MoeMatmul/" + std::string(quant::type_name(m.type)) +
                                 (layout == kRows16 ? ".rows16/" : "/") + std::to_string(m.experts) + "x2x" +
                                 std::to_string(m.rows) + "x" + std::to_string(m.cols) + "/tok" + std::to_string(n_tok);
        benchmark::RegisterBenchmark(name.c_str(), BM_MoeMatmul, m.type, m.experts, m.rows, m.cols, n_tok, layout)
            ->Arg(1)->Arg(2)->UseRealTime();
      }
    }
  }
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::IQ4_XS}) {
    if (!quant::kernels::has_rows16_kernel(t)) continue;
    const bool gpt_oss = t == GgmlType::MXFP4;  // its experts' shape: 2880 x 2880
    const int64_t rows = gpt_oss ? 2880 : 2048, cols = gpt_oss ? 2880 : 4096;
    for (const bool prefetch : {false, true}) {
      const std::string name = "Rows16Prefetch/" + std::string(quant::type_name(t)) + "/" + std::to_string(rows) +
                               "x" + std::to_string(cols) + "/" + (prefetch ? "on" : "off");
      benchmark::RegisterBenchmark(name.c_str(), BM_Rows16Prefetch, t, rows, cols, prefetch)
          ->Arg(1)->Arg(2)->UseRealTime();
    }
  }
  // The load's repack, from DRAM (151 MB of Q4_K, 285 MB of Q8_0: past cold_bytes' 128 MiB): a Qwen3-30B-A3B gate
  // stack (128 experts) is 98304 x 2048.
  for (GgmlType t :
       {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::IQ4_XS}) {
    if (!quant::kernels::has_rows16_kernel(t)) continue;
    for (const bool fresh : {false, true}) {
      for (const bool fast : {false, true}) {
        const std::string name = "Repack/" + std::string(quant::type_name(t)) + "/131072x2048/" +
                                 (fast ? "fast" : "spec") + (fresh ? "/fresh" : "");
        benchmark::RegisterBenchmark(name.c_str(), BM_Repack, t, 131072, 2048, fast, fresh)
            ->Arg(1)->Arg(2)->UseRealTime();
      }
    }
  }
  if (quant::kernels::has_rows16_kernel(GgmlType::Q8_0)) {
    // gpt-oss's attention and output rows (2880 columns: a group's 49 KiB outgrow a 48 KiB L1), both layouts.
    for (const auto layout : {kGguf, kRows16}) {
      for (int64_t n_tok : {32, 128}) {
        const std::string name = std::string("Matmul/Q8_0") + (layout == kRows16 ? ".rows16" : "") +
                                 "/2880x2880/tok" + std::to_string(n_tok);
        benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, GgmlType::Q8_0, 2880, 2880, n_tok, layout)
            ->Arg(1)->Arg(2)->UseRealTime();
      }
    }
  }
  benchmark::RegisterBenchmark("Attention/qwen3-30b-a3b/ctx", BM_Attention)->Arg(512)->Arg(4096)->Arg(32768)
      ->UseRealTime();
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
