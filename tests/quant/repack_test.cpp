// The rows16 layout (quant/repack.h): where each byte of a GGUF Q8_0, Q4_K-Q6_K, MXFP4 or IQ4_XS matrix goes, and the
// kernels that read it (int8_rows16-inl.h) give the GGUF-layout kernels' results bit for bit, for one token and
// several (and a prompt's one), any split of the rows over threads, and beside GGUF-layout products in one call.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/ggml_type.h"
#include "quant/kernels/int8_kernels.h"
#include "quant/matmul.h"
#include "quant/repack.h"
#include "util/thread_pool.h"

namespace moetier::quant {
namespace {

// Random rows of a Q8_0, Q4_K, Q5_K, Q6_K, MXFP4 or IQ4_XS matrix: every byte random (Q8_0 codes down to -128, Q4_K
// and Q5_K scales and mins, Q5_K fifth bits, Q6_K int8 scales down to -128, IQ4_XS 6-bit scales, all nibbles), then
// each block's fp16 fields (Q8_0, Q6_K and IQ4_XS d, Q4_K and Q5_K d and dmin)
// +-[2^-10, 2^-4] (a negative dmin included: the kernels must not assume the quantizer's signs), or MXFP4's
// exponent: 0 to 3 (the subnormal scales 2^-128, 2^-127 and the first normal ones) or 100 to 135 (2^-28 to 2^7),
// which keep the products finite; all_exponents: every exponent 0 to 255 in turn instead.
std::vector<uint8_t> random_matrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng,
                                   bool all_exponents = false) {
  std::vector<uint8_t> m(row_bytes(type, cols) * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(1.0f / 1024, 1.0f / 16);
  for (auto& b : m) b = static_cast<uint8_t>(byte(rng));
  if (type == GgmlType::MXFP4) {
    std::uniform_int_distribution<int> exponent(96, 135);
    for (size_t at = 0, n = 0; at < m.size(); at += sizeof(BlockMXFP4), ++n) {
      const int e = exponent(rng);
      m[at + offsetof(BlockMXFP4, e)] = static_cast<uint8_t>(all_exponents ? n % 256 : e < 100 ? e - 96 : e);
    }
    return m;
  }
  static_assert(offsetof(BlockQ5_K, d) == offsetof(BlockQ4_K, d) &&
                offsetof(BlockQ5_K, dmin) == offsetof(BlockQ4_K, dmin));
  const std::vector<size_t> fields =
      type == GgmlType::Q8_0                              ? std::vector<size_t>{offsetof(BlockQ8_0, d)}
      : type == GgmlType::Q4_K || type == GgmlType::Q5_K ? std::vector<size_t>{offsetof(BlockQ4_K, d),
                                                                                offsetof(BlockQ4_K, dmin)}
      : type == GgmlType::IQ4_XS                          ? std::vector<size_t>{offsetof(BlockIQ4_XS, d)}
                                                          : std::vector<size_t>{offsetof(BlockQ6_K, d)};
  for (size_t at = 0; at < m.size(); at += traits(type).type_size) {
    for (const size_t field : fields) {
      const uint16_t h = fp32_to_fp16((byte(rng) & 1 ? -1.0f : 1.0f) * mag(rng));
      std::memcpy(m.data() + at + field, &h, 2);
    }
  }
  return m;
}

std::vector<uint8_t> repacked(GgmlType type, const std::vector<uint8_t>& gguf, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(gguf.size());
  repack_rows16(type, gguf.data(), row_bytes(type, cols), cols, 0, rows / kRows16, out.data());
  return out;
}

std::vector<float> random_x(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

// A file-layout matrix v1 ([rows1, cols]) and a second one both repacked (v2) and as in the file (v2g).
struct TwoMatrices {
  std::vector<uint8_t> w1, w2, w2r;
  WeightView v1, v2, v2g;
  TwoMatrices(GgmlType type, int64_t rows1, int64_t rows2, int64_t cols, std::mt19937& rng)
      : w1(random_matrix(type, rows1, cols, rng)),
        w2(random_matrix(type, rows2, cols, rng)),
        w2r(repacked(type, w2, rows2, cols)) {
    const size_t rb = row_bytes(type, cols);
    v1 = WeightView{type, w1.data(), rows1, cols, rb};
    v2 = WeightView{type, w2r.data(), rows2, cols, rb};
    v2.layout = WeightLayout::rows16;
    v2g = WeightView{type, w2.data(), rows2, cols, rb};
  }
};

// The types with a rows16 layout, each where this CPU has its kernel.
std::vector<GgmlType> rows16_types() {
  std::vector<GgmlType> t;
  for (const GgmlType type :
       {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::IQ4_XS}) {
    if (kernels::has_rows16_kernel(type)) t.push_back(type);
  }
  return t;
}

// f(src, blk, r, b, l) for every row r and block b of a random GGUF matrix of `type` and its rows16 copy: src the
// row's GGUF block b, blk its group's repacked block b, l the row's lane. Stops at the first fatal failure.
template <class F>
void for_each_block(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng, const F& f) {
  const int64_t nb = cols / traits(type).block_size;
  const std::vector<uint8_t> gguf = random_matrix(type, rows, cols, rng);
  const std::vector<uint8_t> r16 = repacked(type, gguf, rows, cols);
  const size_t rb = row_bytes(type, cols), block = rb / static_cast<size_t>(nb);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* src = gguf.data() + static_cast<size_t>(r) * rb + static_cast<size_t>(b) * block;
      const uint8_t* blk = r16.data() + static_cast<size_t>((r / kRows16) * nb + b) * kRows16 * block;
      f(src, blk, r, b, r % kRows16);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(Rows16, LayoutFitsQ8_0Q4_KToQ6_KMXFP4AndIQ4_XSInGroupsOf16Rows) {
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q8_0, 16, 32));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q8_0, 2880, 2880));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::Q8_0, 24, 32));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::Q8_0, 0, 32));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q4_K, 16, 256));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q4_K, 2048, 768));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::Q4_K, 24, 256));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::Q4_K, 16, 128));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q6_K, 16, 256));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q6_K, 768, 2048));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::Q6_K, 8, 256));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q5_K, 16, 256));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::Q5_K, 2048, 768));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::Q5_K, 40, 256));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::MXFP4, 16, 32));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::MXFP4, 2880, 2880));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::MXFP4, 8, 32));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::IQ4_XS, 16, 256));
  EXPECT_TRUE(rows16_layout_fits(GgmlType::IQ4_XS, 2048, 768));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::IQ4_XS, 24, 256));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::IQ4_NL, 16, 256));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::Q3_K, 16, 256));
  EXPECT_FALSE(rows16_layout_fits(GgmlType::F16, 16, 32));
  static_assert(kRows16BlockBytes == 16 * sizeof(BlockQ8_0) && kRows16Q4KBlockBytes == 16 * sizeof(BlockQ4_K) &&
                kRows16Q5KBlockBytes == 16 * sizeof(BlockQ5_K) && kRows16Q6KBlockBytes == 16 * sizeof(BlockQ6_K) &&
                kRows16Mxfp4BlockBytes == 16 * sizeof(BlockMXFP4) &&
                kRows16Iq4XsBlockBytes == 16 * sizeof(BlockIQ4_XS));
}

TEST(Rows16, EveryByteGoesWhereTheLayoutSays) {
  std::mt19937 rng(3);
  for_each_block(GgmlType::Q8_0, 48, 96, rng, [](const uint8_t* src, const uint8_t* blk, auto r, auto b, auto l) {
    ASSERT_EQ(0, std::memcmp(blk + 2 * l, src, 2)) << "scale of row " << r << " block " << b;
    for (int c = 0; c < 32; ++c) {
      ASSERT_EQ(blk[32 + 64 * (c / 4) + 4 * l + c % 4], static_cast<uint8_t>(src[2 + c] ^ 0x80))
          << "row " << r << " block " << b << " column " << c;
    }
  });
}

// Q4_K, and Q5_K with its fifth-bit vectors between the head and the nibbles.
TEST(Rows16, EveryQ4_KAndQ5_KByteGoesWhereTheLayoutSays) {
  std::mt19937 rng(4);
  for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K}) {
    const bool q5 = type == GgmlType::Q5_K;
    const size_t nibbles_at = q5 ? kRows16Q5KNibblesAt : 256, qs_at = q5 ? offsetof(BlockQ5_K, qs) : 16;
    for_each_block(type, 32, 768, rng, [&](const uint8_t* src, const uint8_t* blk, auto r, auto b, auto l) {
      // the head (d, dmin, scales): bytes 4i .. 4i + 3 in lane l of vector i
      for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, std::memcmp(blk + 64 * i + 4 * l, src + 4 * i, 4)) << "head dword " << i << " of row " << r;
      }
      // Q5_K's fifth bits: qh bytes 4i .. in lane l of vector i from kRows16Q5KQhAt
      for (int i = 0; q5 && i < 8; ++i) {
        ASSERT_EQ(0, std::memcmp(blk + kRows16Q5KQhAt + 64 * i + 4 * l, src + offsetof(BlockQ5_K, qh) + 4 * i, 4))
            << "qh dword " << i << " of row " << r << " block " << b;
      }
      // the nibbles: qs bytes 32p + 4i .. in lane l of nibble vector q4k_rows16_vector(p, i), each vector once
      std::vector<int> seen(32, 0);
      for (int p = 0; p < 4; ++p) {
        for (int i = 0; i < 8; ++i) {
          const int v = q4k_rows16_vector(p, i);
          ASSERT_TRUE(v >= 0 && v < 32 && ++seen[static_cast<size_t>(v)] == 1) << "part " << p << " dword " << i;
          ASSERT_EQ(0, std::memcmp(blk + nibbles_at + 64 * v + 4 * l, src + qs_at + 32 * p + 4 * i, 4))
              << type_name(type) << " qs dword " << 8 * p + i << " of row " << r << " block " << b;
        }
      }
    });
  }
}

TEST(Rows16, EveryQ6_KByteGoesWhereTheLayoutSays) {
  std::mt19937 rng(7);
  for_each_block(GgmlType::Q6_K, 32, 768, rng, [](const uint8_t* src, const uint8_t* blk, auto r, auto b, auto l) {
    for (int c = 0; c < 4; ++c) {  // the scales: bytes 4c .. 4c + 3 in lane l of vector c
      ASSERT_EQ(0, std::memcmp(blk + 64 * c + 4 * l, src + offsetof(BlockQ6_K, scales) + 4 * c, 4))
          << "scales dword " << c << " of row " << r << " block " << b;
    }
    for (int i = 0; i < 8; ++i) {  // the codes: vectors 6i + 3h .. 6i + 3h + 2 after the scales
      for (int h = 0; h < 2; ++h) {
        const uint8_t* v = blk + kRows16Q6KCodesAt + 64 * (6 * i + 3 * h) + 4 * l;
        ASSERT_EQ(0, std::memcmp(v, src + offsetof(BlockQ6_K, qh) + 32 * h + 4 * i, 4)) << "qh " << h << " " << i;
        ASSERT_EQ(0, std::memcmp(v + 64, src + offsetof(BlockQ6_K, ql) + 64 * h + 4 * i, 4)) << "ql " << h << " " << i;
        ASSERT_EQ(0, std::memcmp(v + 128, src + offsetof(BlockQ6_K, ql) + 64 * h + 32 + 4 * i, 4))
            << "ql " << h << " " << 8 + i;
      }
    }
    ASSERT_EQ(0, std::memcmp(blk + kRows16Q6KDAt + 2 * l, src + offsetof(BlockQ6_K, d), 2)) << "d of row " << r;
  });
}

TEST(Rows16, EveryMXFP4ByteGoesWhereTheLayoutSays) {
  std::mt19937 rng(8);
  for_each_block(GgmlType::MXFP4, 32, 96, rng, [](const uint8_t* src, const uint8_t* blk, auto r, auto b, auto l) {
    for (int i = 0; i < 4; ++i) {  // the codes: qs bytes 4i .. 4i + 3 in lane l of vector i
      ASSERT_EQ(0, std::memcmp(blk + 64 * i + 4 * l, src + offsetof(BlockMXFP4, qs) + 4 * i, 4))
          << "qs dword " << i << " of row " << r << " block " << b;
    }
    ASSERT_EQ(blk[kRows16Mxfp4EAt + l], src[offsetof(BlockMXFP4, e)]) << "exponent of row " << r << " block " << b;
  });
}

TEST(Rows16, EveryIQ4_XSByteGoesWhereTheLayoutSays) {
  std::mt19937 rng(15);
  for_each_block(GgmlType::IQ4_XS, 32, 768, rng, [](const uint8_t* src, const uint8_t* blk, auto r, auto b, auto l) {
    // the head: d | scales_h << 16 in lane l of vector 0, scales_l in vector 1
    ASSERT_EQ(0, std::memcmp(blk + 4 * l, src + offsetof(BlockIQ4_XS, d), 2)) << "d of row " << r << " block " << b;
    ASSERT_EQ(0, std::memcmp(blk + 4 * l + 2, src + offsetof(BlockIQ4_XS, scales_h), 2)) << "scales_h of row " << r;
    ASSERT_EQ(0, std::memcmp(blk + 64 + 4 * l, src + offsetof(BlockIQ4_XS, scales_l), 4)) << "scales_l of row " << r;
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(0, std::memcmp(blk + kRows16Iq4XsQsAt + 64 * i + 4 * l, src + offsetof(BlockIQ4_XS, qs) + 4 * i, 4))
          << "qs dword " << i << " of row " << r << " block " << b;
    }
  });
}

// kernels::repack_rows16 (AVX-512 gathers and stores where this CPU has the rows16 kernels) writes the bytes of the
// scalar specification, quant::repack_rows16, and nothing else: every type, one block to several, a range of groups
// that does not start at 0, the destination 64-byte aligned (full-line stores) and not. (The gathers' reads are not
// checked by ASan; repack_rows16-inl.h says why none passes a block's end.)
TEST(Rows16, FastRepackWritesTheSpecificationsBytes) {
  if (rows16_types().empty()) {
    GTEST_SKIP() << "no rows16 kernel on this CPU (" << kernels::int8_kernels_name() << "): the specification runs";
  }
  std::mt19937 rng(13);
  for (const GgmlType type : rows16_types()) {
    const std::vector<int64_t> widths =
        traits(type).block_size == 32 ? std::vector<int64_t>{32, 96, 512, 544, 2880}
                                      : std::vector<int64_t>{256, 768, 2048};
    for (const int64_t cols : widths) {
      constexpr int64_t rows = 48;
      const std::vector<uint8_t> gguf = random_matrix(type, rows, cols, rng);
      const size_t rb = row_bytes(type, cols), n = gguf.size();
      std::vector<uint8_t> want(n, 0xa5);
      repack_rows16(type, gguf.data(), rb, cols, 1, 3, want.data());
      for (const size_t misalign : {size_t{0}, size_t{32}, size_t{4}}) {
        std::vector<uint8_t> buf(n + 64 + misalign, 0xa5);
        uint8_t* out = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64 + misalign;
        std::vector<uint8_t> before(buf);
        kernels::repack_rows16(type, gguf.data(), rb, cols, 1, 3, out);
        ASSERT_EQ(0, std::memcmp(out, want.data(), n))
            << type_name(type) << " " << rows << "x" << cols << ", destination 64-byte aligned + " << misalign
            << ": " << kernels::int8_kernels_name();
        // Before the matrix and in group 0 (outside the range), and after it, nothing was written.
        const auto lead = static_cast<size_t>(out - buf.data());
        ASSERT_EQ(0, std::memcmp(buf.data(), before.data(), lead + 16 * rb));
        ASSERT_EQ(0, std::memcmp(out + n, before.data() + lead + n, buf.size() - lead - n));
      }
    }
  }
}

// y from the GGUF bytes and from the repacked ones, same scratch settings: identical bits. `batched`: the tokens
// are a prompt's (one takes the several-token kernels).
void expect_same_bits(GgmlType type, int64_t rows, int64_t cols, int64_t n_tok, int threads, std::mt19937& rng,
                      bool batched = false) {
  const std::vector<uint8_t> gguf = random_matrix(type, rows, cols, rng);
  const std::vector<uint8_t> r16 = repacked(type, gguf, rows, cols);
  const size_t rb = row_bytes(type, cols);
  WeightView a{type, gguf.data(), rows, cols, rb};
  WeightView b = a;
  b.data = r16.data();
  b.layout = WeightLayout::rows16;
  const std::vector<float> x = random_x(n_tok * cols, rng);
  util::ThreadPool pool(threads);
  MatmulScratch scratch(cols, n_tok, ActivationRounding::match_ggml);
  if (threads > 1) scratch.set_pool(&pool);
  std::vector<float> ya(static_cast<size_t>(n_tok * rows), NAN), yb(ya.size(), NAN);
  const Product pa{a, ya.data()}, pb{b, yb.data()};
  const ProductGroup ga[] = {{{&pa, 1}, x.data(), n_tok, batched}}, gb[] = {{{&pb, 1}, x.data(), n_tok, batched}};
  matmul_groups(ga, scratch);
  matmul_groups(gb, scratch);
  for (size_t i = 0; i < ya.size(); ++i) {
    ASSERT_TRUE(std::isfinite(ya[i]));
    ASSERT_EQ(0, std::memcmp(&ya[i], &yb[i], sizeof(float)))
        << type_name(type) << " " << rows << "x" << cols << ", " << n_tok << (batched ? " batched" : "")
        << " tokens, " << threads << " threads: token " << i / rows << " row " << i % rows << ": " << ya[i]
        << " (GGUF) vs " << yb[i] << " (rows16)";
  }
}

TEST(Rows16, KernelsGiveTheGgufLayoutsBits) {
  if (rows16_types().empty()) {
    GTEST_SKIP() << "no rows16 kernel on this CPU (" << kernels::int8_kernels_name() << "): nothing is repacked";
  }
  std::mt19937 rng(11);
  for (const GgmlType type : rows16_types()) {
    // Q8_0 from one block of 32 to gpt-oss's 2880 columns; the K-quants from one block of 256 (an odd last block
    // alone), two, three (pairs and an odd last one: a down projection's 768) to Qwen3's 2048.
    const std::vector<int64_t> widths =
        traits(type).block_size == 32 ? std::vector<int64_t>{32, 96, 512, 544, 2880}
                                      : std::vector<int64_t>{256, 512, 768, 2048};
    // The file layout's one-token kernels read rows one at a time or two side by side (one_stream_rows): the
    // same bits either way, and so the repacked ones', which ask for their bytes ahead or not (rows16_prefetch).
    for (const int mode : {0, 1}) {
      kernels::set_one_stream_rows_for_test(mode);
      kernels::set_rows16_prefetch_for_test(1 - mode);
      for (const int64_t n_tok : {1, 2, 3, 4, 5, 8, 9}) {
        for (const int64_t rows : {16, 48, 64}) {
          for (const int64_t cols : widths) expect_same_bits(type, rows, cols, n_tok, 1, rng);
        }
      }
      for (const int64_t cols : widths) expect_same_bits(type, 32, cols, 1, 1, rng, true);
      // Large enough to be split over the threads, in chunks of whole groups.
      for (const int threads : {2, 3}) {
        expect_same_bits(type, 2048, 512, 1, threads, rng);
        expect_same_bits(type, 512, traits(type).block_size == 32 ? 2880 : 2048, 3, threads, rng);
      }
    }
    kernels::set_one_stream_rows_for_test(-1);
    kernels::set_rows16_prefetch_for_test(-1);
  }
}

// MXFP4's scales, which the repacked kernels build from the exponent bits where the GGUF layout's read a table: every
// exponent 0 to 255 (the subnormal 2^-128 and 2^-127 included, and products that overflow), one token and several.
// Bit for bit, infinities and NaNs included.
TEST(Rows16, Mxfp4KernelsGiveTheGgufLayoutsBitsForEveryExponent) {
  if (!kernels::has_rows16_kernel(GgmlType::MXFP4)) {
    GTEST_SKIP() << "no rows16 MXFP4 kernel on this CPU (" << kernels::int8_kernels_name() << ")";
  }
  std::mt19937 rng(12);
  const int64_t rows = 32, cols = 512;  // 16 blocks a row: every exponent once in the 256 blocks of each group
  const std::vector<uint8_t> gguf = random_matrix(GgmlType::MXFP4, rows, cols, rng, true);
  const std::vector<uint8_t> r16 = repacked(GgmlType::MXFP4, gguf, rows, cols);
  const size_t rb = row_bytes(GgmlType::MXFP4, cols);
  WeightView a{GgmlType::MXFP4, gguf.data(), rows, cols, rb};
  WeightView b = a;
  b.data = r16.data();
  b.layout = WeightLayout::rows16;
  for (const int64_t n_tok : {1, 3}) {
    const std::vector<float> x = random_x(n_tok * cols, rng);
    MatmulScratch scratch(cols, n_tok, ActivationRounding::match_ggml);
    std::vector<float> ya(static_cast<size_t>(n_tok * rows), 0.0f), yb(ya.size(), 1.0f);
    matmul(a, x.data(), ya.data(), n_tok, scratch);
    matmul(b, x.data(), yb.data(), n_tok, scratch);
    EXPECT_EQ(0, std::memcmp(ya.data(), yb.data(), sizeof(float) * ya.size())) << n_tok << " tokens";
  }
}

// A repacked product and a GGUF-layout one of the same activations in one call (the activations quantized once;
// Q8_0's quad sums for the repacked one only), one token (decode) and two: each as alone.
TEST(Rows16, MixedLayoutsInOneGroupMatchSeparateCalls) {
  if (rows16_types().empty()) {
    GTEST_SKIP() << "no rows16 kernel on this CPU (" << kernels::int8_kernels_name() << "): nothing is repacked";
  }
  std::mt19937 rng(5);
  for (const GgmlType type : rows16_types()) {
    for (const int64_t n_tok : {1, 2}) {
      const int64_t cols = 512;
      const TwoMatrices m(type, 32, 48, cols, rng);
      const WeightView &v1 = m.v1, &v2 = m.v2, &v2g = m.v2g;
      const std::vector<float> x = random_x(n_tok * cols, rng);
      MatmulScratch scratch(cols, n_tok, ActivationRounding::match_ggml);
      std::vector<float> y1(static_cast<size_t>(n_tok * 32), NAN), y2(static_cast<size_t>(n_tok * 48), NAN);
      const Product ps[] = {{v1, y1.data()}, {v2, y2.data()}};
      matmul_shared_x(ps, x.data(), n_tok, scratch);
      std::vector<float> z1(y1.size()), z2(y2.size());
      matmul(v1, x.data(), z1.data(), n_tok, scratch);
      matmul(v2g, x.data(), z2.data(), n_tok, scratch);
      for (const float v : y2) ASSERT_TRUE(std::isfinite(v));
      EXPECT_EQ(0, std::memcmp(y1.data(), z1.data(), sizeof(float) * y1.size())) << type_name(type) << " " << n_tok;
      EXPECT_EQ(0, std::memcmp(y2.data(), z2.data(), sizeof(float) * y2.size())) << type_name(type) << " " << n_tok;
    }
  }
}

// Two groups of one token with the same activations, the first of the file layout and the second repacked. A
// repacked Q8_0 group must not take the first's quantized rows, which lack the quad biases its kernel reads
// (matmul_groups shares rows between those layouts only for other types, whose repacked kernels read the rows
// alone: Q4_K, Q5_K, Q6_K). Both give the bits of separate calls.
TEST(Rows16, GroupsOfBothLayoutsSharingActivationsMatchSeparateCalls) {
  if (rows16_types().empty()) {
    GTEST_SKIP() << "no rows16 kernel on this CPU (" << kernels::int8_kernels_name() << "): nothing is repacked";
  }
  std::mt19937 rng(6);
  for (const GgmlType type : rows16_types()) {
    const int64_t cols = 512;
    const TwoMatrices m(type, 32, 32, cols, rng);
    const WeightView &v1 = m.v1, &v2 = m.v2, &v2g = m.v2g;
    const std::vector<float> x = random_x(cols, rng);
    MatmulScratch scratch(cols, 2, ActivationRounding::match_ggml);  // room for both groups' rows: taken together
    std::vector<float> y1(32, NAN), y2(32, NAN), z1(32), z2(32);
    const Product p1{v1, y1.data()}, p2{v2, y2.data()};
    const ProductGroup groups[] = {{{&p1, 1}, x.data(), 1, false}, {{&p2, 1}, x.data(), 1, false}};
    matmul_groups(groups, scratch);
    matmul(v1, x.data(), z1.data(), 1, scratch);
    matmul(v2g, x.data(), z2.data(), 1, scratch);
    for (const float v : y2) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(0, std::memcmp(y1.data(), z1.data(), sizeof(float) * y1.size())) << type_name(type);
    EXPECT_EQ(0, std::memcmp(y2.data(), z2.data(), sizeof(float) * y2.size())) << type_name(type);
  }
}

}  // namespace
}  // namespace moetier::quant
