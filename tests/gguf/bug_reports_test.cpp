// GGUF files that other engines' bug reports describe, each crafted byte by byte: alignments that are multiples
// of 8 but not powers of two, alignment 0, a big-endian file, a header tensor count that disagrees with the
// tensor infos present, and a split set as llama.cpp's gguf-split writes it (split.no 0-based, file names
// 1-based, only shard 1 carrying the architecture and the tokenizer).
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "raw_gguf.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::gguf {
namespace {

using test_raw::RawGguf;

constexpr uint32_t kF32 = 0;

std::filesystem::path tmp(const std::string& name) { return test::tmp_dir("gguf-bug-reports") / (name + ".gguf"); }

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

RawGguf& floats(RawGguf& g, std::initializer_list<float> xs) {
  for (const float x : xs) {
    uint32_t u = 0;
    std::memcpy(&u, &x, 4);
    g.u32(u);
  }
  return g;
}

std::vector<float> values(const TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

// Writes `g` as `name` and expects opening it to fail as expect_open_error says.
void expect_error(const RawGguf& g, const std::string& name, std::initializer_list<std::string> words) {
  const auto p = tmp(name);
  g.write(p);
  test_raw::expect_open_error(p, words);
}

// general.alignment as uint32 16 and 24: any nonzero multiple of 8 is valid (ggml docs/gguf.md), a power of two
// or not. The data section starts at the aligned end of the tensor infos and each tensor at a multiple of the
// alignment after it; the bytes read back are the ones written there.
TEST(GgufBugReports, AlignmentSixteenAndTwentyFour) {
  for (const uint32_t al : {16u, 24u}) {
    SCOPED_TRACE(al);
    const uint64_t b_offset = round_up(3 * 4, al);  // "a" is 3 floats
    RawGguf g;
    g.header(2, 1).kv_u32("general.alignment", al).tensor("a", {3}, kF32, 0).tensor("b", {2}, kF32, b_offset);
    const uint64_t infos_end = g.size();
    ASSERT_NE(infos_end % al, 0u) << "the case needs padding after the tensor infos";
    g.pad(al);
    const uint64_t data_at = g.size();
    floats(g, {1.5f, 2.5f, 3.5f}).zeros(static_cast<size_t>(b_offset - 12));
    floats(g, {-4.0f, 8.0f});
    const auto p = tmp("align" + std::to_string(al));
    g.write(p);
    const GgufModel m = GgufModel::open(p);
    EXPECT_EQ(m.shards()[0].alignment, al);
    EXPECT_EQ(m.shards()[0].data_section_offset, round_up(infos_end, al));
    EXPECT_EQ(m.shards()[0].data_section_offset, data_at);
    EXPECT_EQ(m.get("b").file_offset, data_at + b_offset);
    EXPECT_EQ(values(m.get("a")), (std::vector<float>{1.5f, 2.5f, 3.5f}));
    EXPECT_EQ(values(m.get("b")), (std::vector<float>{-4.0f, 8.0f}));
  }
}

// moetier's own writer and write_split keep an alignment of 24: a split of a 24-aligned file reads back as it.
TEST(GgufBugReports, WriterAndSplitKeepAlignmentTwentyFour) {
  const auto dir = test::tmp_dir("gguf-bug-reports-write24");
  const auto p = dir / "w24.gguf";
  {
    GgufWriter w(p, 24);
    Metadata md;
    md.set("general.architecture", Value::of_string("llama"));
    w.set_metadata(md);
    w.add_tensor({"a", quant::GgmlType::F32, {3}});
    w.add_tensor({"b", quant::GgmlType::F32, {2}});
    const std::vector<float> a{1, 2, 3}, b{4, 5};
    w.write_tensor_data({reinterpret_cast<const uint8_t*>(a.data()), 12});
    w.write_tensor_data({reinterpret_cast<const uint8_t*>(b.data()), 8});
    w.finish();
  }
  const GgufModel m = GgufModel::open(p);
  EXPECT_EQ(m.shards()[0].alignment, 24u);
  EXPECT_EQ(m.get("b").data_offset, 24u);
  EXPECT_EQ(values(m.get("b")), (std::vector<float>{4, 5}));
  const auto shards = write_split(m, dir, "w24", 2);
  const GgufModel s = GgufModel::open(shards[1]);
  ASSERT_EQ(s.shards().size(), 2u);
  for (const auto& sh : s.shards()) EXPECT_EQ(sh.alignment, 24u);
  EXPECT_EQ(values(s.get("a")), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(values(s.get("b")), (std::vector<float>{4, 5}));
}

// A data offset that is a multiple of 8 but not of the alignment 24 is refused, naming it.
TEST(GgufBugReports, OffsetNotAMultipleOfTwentyFour) {
  RawGguf g;
  g.header(2, 1).kv_u32("general.alignment", 24).tensor("a", {3}, kF32, 0).tensor("b", {2}, kF32, 16).pad(24);
  g.zeros(48);
  expect_error(g, "align24-offset16", {"'b'", "data offset 16", "alignment 24"});
}

// Alignment 0 is a clear error, never a division by zero; neither is 12 (not a multiple of 8).
TEST(GgufBugReports, AlignmentZeroAndTwelveAreErrors) {
  for (const uint32_t al : {0u, 12u}) {
    RawGguf g;
    g.header(1, 1).kv_u32("general.alignment", al).tensor("t", {8}, kF32, 0).pad().zeros(64);
    expect_error(g, "align" + std::to_string(al),
                 {"general.alignment is " + std::to_string(al), "nonzero multiple of 8"});
  }
}

// A byte-swapped (big-endian) file: the magic matches, every number after it is reversed. The error says so.
TEST(GgufBugReports, BigEndianFileSaysSo) {
  RawGguf g;
  g.big_endian = true;
  g.header(1, 1).kv_string("general.architecture", "llama").tensor("t", {8}, kF32, 0).pad().zeros(32);
  expect_error(g, "big-endian", {"version 3 byte-swapped", "big-endian"});
}

// The header declares 3 tensors and 2 infos follow, then the padding and the data: the third "info" is read
// from zero padding or from tensor data. Either way the message points at the tensor count.
TEST(GgufBugReports, TensorCountLargerThanTheInfosPresent) {
  RawGguf padded;  // the infos end mid-alignment: zero padding comes next
  padded.header(3, 0).tensor("a", {8}, kF32, 0).tensor("b", {8}, kF32, 32);
  ASSERT_NE(padded.size() % 32, 0u);
  padded.pad().zeros(64);
  expect_error(padded, "count3-padded", {"tensor info 3 of the 3", "tensor count"});

  RawGguf unpadded;  // 24 + 2 x (32 + 20) = 128: the data follows the infos at once
  unpadded.header(3, 0).tensor("aaaaaaaaaaaaaaaaaaaa", {8}, kF32, 0).tensor("bbbbbbbbbbbbbbbbbbbb", {8}, kF32, 32);
  ASSERT_EQ(unpadded.size() % 32, 0u);
  floats(unpadded, {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2});
  expect_error(unpadded, "count3-unpadded", {"tensor info 3 of the 3", "tensor count"});
}

// The header declares 1 tensor and 2 infos follow: the second info would be taken for padding and data, and
// tensor "a" would silently read its bytes. Refused, naming the tensor that follows, whether or not the declared
// infos end on the alignment.
TEST(GgufBugReports, TensorCountSmallerThanTheInfosPresent) {
  RawGguf padded;
  padded.header(1, 0).tensor("a", {8}, kF32, 0);
  ASSERT_NE(padded.size() % 32, 0u);
  padded.tensor("b", {8}, kF32, 32).pad().zeros(64);
  expect_error(padded, "count1-padded", {"'b'", "follows", "tensor count", "smaller"});

  RawGguf aligned;  // 24 + 32 + 8 = 64: the declared infos end on the alignment, so no padding is read
  aligned.header(1, 0).tensor("aaaaaaaa", {8}, kF32, 0);
  ASSERT_EQ(aligned.size() % 32, 0u);
  aligned.tensor("b", {8}, kF32, 32).pad().zeros(64);
  expect_error(aligned, "count1-aligned", {"'b'", "follows", "tensor count", "smaller"});
}

// gguf-split's layout: NAME-00001-of-00002.gguf holds every key of the model plus split.no = 0 (uint16),
// split.count = 2 (uint16) and split.tensors.count = 2 (int32); NAME-00002-of-00002.gguf holds only the split
// keys, split.no = 1. Opened from either shard, the model is shard 1's metadata (architecture, tokenizer) over
// the tensors of both, each read from its own shard's data section.
TEST(GgufBugReports, GgufSplitSetWithZeroBasedSplitNo) {
  const auto dir = test::tmp_dir("gguf-bug-reports-split");
  const std::vector<std::string> tokens{"<unk>", "<s>", "</s>", "hi"};
  RawGguf first;
  first.header(1, 6)
      .kv_string("general.architecture", "llama")
      .kv_string("tokenizer.ggml.model", "llama")
      .kv_strings("tokenizer.ggml.tokens", tokens)
      .kv_u16("split.no", 0)
      .kv_u16("split.count", 2)
      .kv_i32("split.tensors.count", 2)
      .tensor("a", {4}, kF32, 0)
      .pad();
  floats(first, {1, 2, 3, 4}).pad();
  RawGguf second;
  second.header(1, 3).kv_u16("split.no", 1).kv_u16("split.count", 2).kv_i32("split.tensors.count", 2);
  second.tensor("b", {2}, kF32, 0).pad();
  floats(second, {5, 6}).pad();
  const auto p1 = dir / "m-00001-of-00002.gguf", p2 = dir / "m-00002-of-00002.gguf";
  first.write(p1);
  second.write(p2);
  for (const auto& from : {p1, p2}) {
    SCOPED_TRACE(from.filename().string());
    const GgufModel m = GgufModel::open(from);
    ASSERT_EQ(m.shards().size(), 2u);
    EXPECT_EQ(m.shards()[0].path, p1);
    EXPECT_EQ(m.architecture(), "llama");
    EXPECT_EQ(m.metadata().get_string_array("tokenizer.ggml.tokens"), tokens);
    EXPECT_FALSE(m.shards()[1].metadata.has("general.architecture"));
    EXPECT_EQ(m.get("a").shard, 0u);
    EXPECT_EQ(m.get("b").shard, 1u);
    EXPECT_EQ(values(m.get("a")), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(values(m.get("b")), (std::vector<float>{5, 6}));
  }
}

// A writer that numbers split.no from 1 like the file names: refused, naming the shard and the expected value.
TEST(GgufBugReports, OneBasedSplitNoIsRefused) {
  const auto dir = test::tmp_dir("gguf-bug-reports-split1");
  RawGguf first;
  first.header(1, 3).kv_u16("split.no", 1).kv_u16("split.count", 2).kv_i32("split.tensors.count", 2);
  first.tensor("a", {8}, kF32, 0).pad().zeros(32);
  RawGguf second;
  second.header(1, 3).kv_u16("split.no", 2).kv_u16("split.count", 2).kv_i32("split.tensors.count", 2);
  second.tensor("b", {8}, kF32, 0).pad().zeros(32);
  first.write(dir / "m-00001-of-00002.gguf");
  second.write(dir / "m-00002-of-00002.gguf");
  try {
    GgufModel::open(dir / "m-00001-of-00002.gguf");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("m-00001-of-00002.gguf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("split.no is 1, expected 0"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace moetier::gguf
