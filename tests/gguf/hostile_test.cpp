// Malformed and hostile GGUF files: each must fail with an Error naming the file and the specific problem, fast
// and without large allocations.
#include <initializer_list>
#include <string>

#include "gguf/gguf.h"
#include "raw_gguf.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::gguf {
namespace {

using test_raw::RawGguf;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;
constexpr uint32_t kIQ2_XXS = 16;

std::filesystem::path tmp(const std::string& name) { return test::tmp_dir("gguf-hostile") / (name + ".gguf"); }

void expect_error(const std::filesystem::path& p, std::initializer_list<std::string> words) {
  test_raw::expect_open_error(p, words);
}

void expect_error(const RawGguf& g, const std::string& name, std::initializer_list<std::string> words) {
  const auto p = tmp(name);
  g.write(p);
  expect_error(p, words);
}

// A valid file: two metadata keys, tensors "a" (F32 [8], 32 B) and "b" (F32 [4, 2], 32 B). Marks record where
// each section starts so truncation tests can cut inside it.
struct Valid {
  RawGguf g;
  size_t metadata_at = 0, infos_at = 0, data_at = 0;
  Valid() {
    g.header(2, 2);
    metadata_at = g.size();
    g.kv_string("general.architecture", "llama").kv_u32("llama.block_count", 1);
    infos_at = g.size();
    g.tensor("a", {8}, kF32, 0).tensor("b", {4, 2}, kF32, 32).pad();
    data_at = g.size();
    g.zeros(64);
  }
};

TEST(GgufHostile, ValidBaselineOpens) {
  Valid v;
  v.g.write(tmp("valid"));
  GgufModel m = GgufModel::open(tmp("valid"));
  ASSERT_EQ(m.tensors().size(), 2u);
  EXPECT_EQ(m.get("b").ne[1], 2);
  EXPECT_EQ(m.get("b").file_offset, v.data_at + 32);
  EXPECT_EQ(m.metadata().get_uint("llama.block_count"), 1u);
}

TEST(GgufHostile, TruncatedAtEverySection) {
  Valid v;
  struct Cut {
    const char* name;
    size_t at;
    std::initializer_list<std::string> words;
  };
  const Cut cuts[] = {
      {"trunc-magic", 2, {"truncated", "magic"}},
      {"trunc-header", 12, {"truncated", "tensor count"}},
      {"trunc-metadata", v.metadata_at + 30, {"truncated"}},
      {"trunc-infos", v.infos_at + 12, {"truncated"}},
      {"trunc-data", v.data_at + 40, {"'b'", "past the end"}},
  };
  for (const auto& c : cuts) {
    const auto p = tmp(c.name);
    v.g.write(p, c.at);
    expect_error(p, c.words);
  }
  // Every single truncation point fails cleanly (or, past the last tensor byte, opens).
  for (size_t at = 0; at < v.g.size(); ++at) {
    const auto p = tmp("trunc-any");
    v.g.write(p, at);
    EXPECT_THROW(GgufModel::open(p), Error) << "cut at " << at;
  }
}

TEST(GgufHostile, EmptyFile) { expect_error(RawGguf{}, "empty", {"truncated", "magic"}); }

TEST(GgufHostile, BadMagic) {
  Valid v;
  v.g.b[0] = 'X';
  expect_error(v.g, "bad-magic", {"magic", "GGUF"});
}

TEST(GgufHostile, Version1And99) {
  RawGguf v1;
  v1.header(0, 0, 1);
  expect_error(v1, "version1", {"version 1", "not supported"});
  RawGguf v99;
  v99.header(0, 0, 99);
  expect_error(v99, "version99", {"version 99"});
}

TEST(GgufHostile, Version2Accepted) {
  RawGguf g;
  g.header(1, 0, 2).tensor("t", {8}, kF32, 0).pad().zeros(32);
  g.write(tmp("version2"));
  EXPECT_EQ(GgufModel::open(tmp("version2")).shards()[0].version, 2u);
}

TEST(GgufHostile, TensorDataPastEnd) {
  RawGguf g;
  g.header(1, 0).tensor("big", {1024}, kF32, 0).pad().zeros(64);
  expect_error(g, "past-end", {"'big'", "past the end"});
}

TEST(GgufHostile, HugeOffsetDoesNotWrap) {
  RawGguf g;
  g.header(1, 0).tensor("wrap", {8}, kF32, 0xFFFFFFFFFFFFFFE0ull).pad().zeros(32);
  expect_error(g, "offset-wrap", {"'wrap'", "past the end"});
}

TEST(GgufHostile, UnknownTensorType) {
  RawGguf g;
  g.header(1, 0).tensor("x", {8}, 99, 0).pad().zeros(32);
  expect_error(g, "unknown-type", {"unknown tensor type id 99 for tensor 'x'"});
}

TEST(GgufHostile, RemovedTypeIdIsUnknown) {
  RawGguf g;
  g.header(1, 0).tensor("q4_2", {32}, 4, 0).pad().zeros(32);
  expect_error(g, "removed-type", {"unknown tensor type id 4", "'q4_2'"});
}

TEST(GgufHostile, KnownButUnsupportedTypeIsAccepted) {
  RawGguf g;
  g.header(1, 0).tensor("iq2", {256}, kIQ2_XXS, 0).pad().zeros(96);
  g.write(tmp("iq2xxs"));
  GgufModel m = GgufModel::open(tmp("iq2xxs"));
  EXPECT_EQ(m.get("iq2").type, quant::GgmlType::IQ2_XXS);
  EXPECT_EQ(m.get("iq2").n_bytes, 66u);
}

TEST(GgufHostile, DuplicateTensorNames) {
  RawGguf g;
  g.header(2, 0).tensor("dup", {8}, kF32, 0).tensor("dup", {8}, kF32, 32).pad().zeros(64);
  expect_error(g, "dup-tensor", {"duplicate tensor name 'dup'"});
}

TEST(GgufHostile, DuplicateKeys) {
  RawGguf g;
  g.header(0, 2).kv_u32("k.same", 1).kv_u32("k.same", 2);
  expect_error(g, "dup-key", {"duplicate metadata key 'k.same'"});
}

TEST(GgufHostile, StringLengthLargerThanFile) {
  RawGguf g;
  g.header(0, 1).str("general.name").u32(8).u64(1ull << 40).zeros(16);
  expect_error(g, "long-string", {"string length 1099511627776", "general.name"});
  RawGguf k;
  k.header(0, 1).u64(~0ull).zeros(16);
  expect_error(k, "long-key", {"string length 18446744073709551615"});
}

TEST(GgufHostile, ArrayCountTwoToThe62) {
  RawGguf g;
  g.header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(1ull << 62).zeros(64);
  expect_error(g, "array-count", {"array count 4611686018427387904", "tokenizer.ggml.tokens"});
  RawGguf nested;
  nested.header(0, 1).str("n").u32(9).u32(9).u64(1).u32(0).u64(1ull << 62).zeros(64);
  expect_error(nested, "nested-array-count", {"array count 4611686018427387904"});
}

TEST(GgufHostile, HugeArrayThatFitsTheFileIsCapped) {
  // 2^26 uint8 elements are really present, but parsing them would take ~3 GB of Values.
  RawGguf g;
  g.header(0, 1).str("big").u32(9).u32(0).u64(1ull << 26).zeros(size_t{1} << 26);
  expect_error(g, "huge-array", {"array count 67108864", "'big'", "limit"});
}

TEST(GgufHostile, CountsLargerThanFile) {
  RawGguf kv;
  kv.header(0, 1ull << 60).zeros(64);
  expect_error(kv, "kv-count", {"key/value count 1152921504606846976", "cannot fit"});
  RawGguf t;
  t.header(0, 0).zeros(64);
  t.b[8] = 0;  // tensor count = 2^60
  t.b[15] = 0x10;
  expect_error(t, "tensor-count", {"tensor count 1152921504606846976", "cannot fit"});
}

TEST(GgufHostile, UnknownValueType) {
  RawGguf g;
  g.header(0, 1).str("k").u32(13).u32(0);
  expect_error(g, "value-type", {"unknown metadata value type 13", "'k'"});
}

TEST(GgufHostile, NestedArraysReadAndDeepNestingRefused) {
  RawGguf g;
  // [[1, 2], [3]] as arrays of int32, then an array of strings.
  g.header(0, 2).str("nested").u32(9).u32(9).u64(2);
  g.u32(5).u64(2).u32(1).u32(2);
  g.u32(5).u64(1).u32(3);
  g.str("strings").u32(9).u32(8).u64(2).str("x").str("yz");
  g.write(tmp("nested"));
  GgufModel m = GgufModel::open(tmp("nested"));
  const auto& outer = m.metadata().get("nested").as_array();
  ASSERT_EQ(outer.size(), 2u);
  EXPECT_EQ(outer[0].as_array().size(), 2u);
  EXPECT_EQ(outer[1].as_array()[0].as_int(), 3);
  EXPECT_EQ(m.metadata().get_string_array("strings"), (std::vector<std::string>{"x", "yz"}));

  RawGguf deep;
  deep.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 100; ++i) deep.u32(9).u64(1);
  deep.u32(0).u64(0);
  expect_error(deep, "deep-array", {"nests arrays deeper", "'deep'"});
}

TEST(GgufHostile, ElementCountOverflow) {
  RawGguf g;
  g.header(1, 0).tensor("huge", {1ull << 32, 1ull << 32}, kF32, 0).pad().zeros(32);
  expect_error(g, "ne-overflow", {"'huge'", "overflows"});
  RawGguf b;  // elements fit int64 but F32 bytes do not fit uint64
  b.header(1, 0).tensor("bytes", {1ull << 31, 1ull << 31}, kF32, 0).pad().zeros(32);
  expect_error(b, "bytes-overflow", {"'bytes'"});
}

TEST(GgufHostile, NegativeDimension) {
  RawGguf g;
  g.header(1, 0).tensor("neg", {~0ull}, kF32, 0).pad().zeros(32);
  expect_error(g, "ne-negative", {"'neg'", "negative"});
}

TEST(GgufHostile, RowNotMultipleOfBlock) {
  RawGguf g;
  g.header(1, 0).tensor("q", {16}, kQ4_0, 0).pad().zeros(32);
  expect_error(g, "block-size", {"'q'", "block size 32"});
}

TEST(GgufHostile, MisalignedOffset) {
  RawGguf g;
  g.header(1, 0).tensor("mis", {8}, kF32, 4).pad().zeros(64);
  expect_error(g, "misaligned", {"'mis'", "not a multiple of the alignment 32"});
}

TEST(GgufHostile, BadAlignment) {
  RawGguf zero;
  zero.header(0, 1).kv_u32("general.alignment", 0);
  expect_error(zero, "align-zero", {"general.alignment", "multiple of 8"});
  RawGguf odd;  // 48 is valid (a multiple of 8, as the specification asks); 20 is not
  odd.header(0, 1).kv_u32("general.alignment", 20);
  expect_error(odd, "align-20", {"general.alignment is 20", "multiple of 8"});
  RawGguf str;
  str.header(0, 1).kv_string("general.alignment", "32");
  expect_error(str, "align-string", {"general.alignment", "string"});
}

TEST(GgufHostile, CustomAlignmentHonoured) {
  RawGguf g;
  g.header(1, 1).kv_u32("general.alignment", 64).tensor("t", {8}, kF32, 0).pad(64).zeros(64);
  g.write(tmp("align64"));
  GgufModel m = GgufModel::open(tmp("align64"));
  EXPECT_EQ(m.shards()[0].alignment, 64u);
  EXPECT_EQ(m.get("t").file_offset % 64, 0u);
}

TEST(GgufHostile, NDims5And0) {
  RawGguf g;
  g.header(1, 0).tensor("five", {1, 1, 1, 1, 8}, kF32, 0).pad().zeros(32);
  expect_error(g, "ndims5", {"'five'", "n_dims 5"});
  RawGguf z;
  z.header(1, 0).tensor("zero", {}, kF32, 0).zeros(64);
  expect_error(z, "ndims0", {"'zero'", "n_dims 0"});
}

TEST(GgufHostile, RandomBytesNeverCrash) {
  // A cheap in-suite fuzz: flip bytes of a valid file; every outcome is a model or an Error.
  Valid v;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int iter = 0; iter < 2000; ++iter) {
    RawGguf g = v.g;
    for (int k = 0; k < 3; ++k) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      g.b[state % g.b.size()] = static_cast<uint8_t>(state >> 32);
    }
    try {
      (void)parse_header(g.b, g.b.size(), "random");
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace moetier::gguf
