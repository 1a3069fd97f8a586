// GgufWriter round trips and write_split: what is written reads back identically.
#include <cstring>
#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "gguf/split_name.h"
#include "gguf/writer.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::gguf {
namespace {

std::filesystem::path model(const char* name) { return test::oracle_dir() / "models" / name; }

// Copies `src` through GgufWriter, feeding each tensor in uneven chunks to exercise the streaming path.
void copy_model(const GgufModel& src, const std::filesystem::path& dst) {
  GgufWriter w(dst, src.shards().front().alignment);
  w.set_metadata(src.metadata());
  for (const auto& t : src.tensors())
    w.add_tensor({t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)});
  for (const auto& t : src.tensors()) {
    uint64_t off = 0;
    for (uint64_t chunk = 1; off < t.n_bytes; chunk = chunk * 3 + 7) {
      const uint64_t n = std::min(chunk, t.n_bytes - off);
      w.write_tensor_data({t.data + off, static_cast<size_t>(n)});
      off += n;
    }
  }
  w.finish();
}

void expect_same_tensors(const GgufModel& a, const GgufModel& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& ta : a.tensors()) {
    const TensorInfo* tb = b.find(ta.name);
    ASSERT_NE(tb, nullptr) << ta.name;
    EXPECT_EQ(ta.type, tb->type) << ta.name;
    EXPECT_EQ(ta.n_dims, tb->n_dims) << ta.name;
    EXPECT_EQ(ta.ne, tb->ne) << ta.name;
    ASSERT_EQ(ta.n_bytes, tb->n_bytes) << ta.name;
    EXPECT_EQ(std::memcmp(ta.data, tb->data, ta.n_bytes), 0) << ta.name;
  }
}

std::vector<char> file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(GgufWriter, RoundTripPreservesMetadataAndTensors) {
  for (const char* name : {"stories260K.gguf", "tiny-qwen3moe-Q4_K_M.gguf", "tiny-gptoss-MXFP4.gguf"}) {
    SCOPED_TRACE(name);
    const GgufModel src = GgufModel::open(model(name));
    const auto dst = test::tmp_dir("gguf-writer") / name;
    copy_model(src, dst);
    const GgufModel back = GgufModel::open(dst);
    ASSERT_EQ(back.metadata().size(), src.metadata().size());
    for (size_t i = 0; i < src.metadata().size(); ++i) {
      const auto& [k, v] = src.metadata().entries()[i];
      EXPECT_EQ(back.metadata().entries()[i].first, k);
      EXPECT_TRUE(back.metadata().entries()[i].second == v) << k;
    }
    expect_same_tensors(src, back);
    // The tensor order is kept too.
    for (size_t i = 0; i < src.tensors().size(); ++i) EXPECT_EQ(src.tensors()[i].name, back.tensors()[i].name);
    // The writer lays files out as the llama.cpp tools do, so a copy is byte-identical to the original.
    EXPECT_TRUE(file_bytes(dst) == file_bytes(model(name)));
  }
}

TEST(GgufWriter, RewritingOwnOutputIsByteIdentical) {
  const GgufModel src = GgufModel::open(model("tiny-mixtral-Q4_0.gguf"));
  const auto a = test::tmp_dir("gguf-writer") / "idem-a.gguf";
  const auto b = test::tmp_dir("gguf-writer") / "idem-b.gguf";
  copy_model(src, a);
  copy_model(GgufModel::open(a), b);
  EXPECT_TRUE(file_bytes(a) == file_bytes(b));
}

TEST(GgufWriter, CustomAlignmentAndEveryValueType) {
  Metadata md;
  md.set("general.architecture", Value::of_string("test"));
  md.set("u8", Value::of_uint8(200));
  md.set("u16", Value::of_uint16(60000));
  md.set("i32", Value::of_int32(-5));
  md.set("u64", Value::of_uint64(1ull << 40));
  md.set("i64", Value::of_int64(-(1ll << 40)));
  md.set("f32", Value::of_float32(0.5f));
  md.set("f64", Value::of_float64(1e-300));
  md.set("b", Value::of_bool(true));
  md.set("nested", Value::of_array(ValueType::ARRAY, {Value::of_array(ValueType::INT32, {Value::of_int32(1)}),
                                                      Value::of_array(ValueType::INT32, {})}));
  const auto p = test::tmp_dir("gguf-writer") / "types.gguf";
  {
    GgufWriter w(p, 64);
    w.set_metadata(md);
    w.add_tensor({"t0", quant::GgmlType::F32, {3}});
    w.add_tensor({"empty", quant::GgmlType::F32, {0, 4}});
    w.add_tensor({"t1", quant::GgmlType::Q8_0, {32, 2}});
    const std::vector<uint8_t> t0(12, 1), t1(68, 2);
    w.write_tensor_data(t0);
    w.write_tensor_data(t1);
    w.finish();
  }
  const GgufModel m = GgufModel::open(p);
  EXPECT_EQ(m.shards()[0].alignment, 64u);
  EXPECT_EQ(m.metadata().get_uint("general.alignment"), 64u);
  for (const auto& [k, v] : md.entries()) EXPECT_TRUE(*m.metadata().find(k) == v) << k;
  EXPECT_EQ(m.get("t1").file_offset % 64, 0u);
  EXPECT_EQ(m.get("t1").data[67], 2);
  EXPECT_EQ(m.get("empty").n_bytes, 0u);
}

TEST(GgufWriter, MisuseAndIoErrorsAreErrors) {
  const auto dir = test::tmp_dir("gguf-writer");
  // Any nonzero multiple of 8 is a valid alignment (48 and 24 are), as the reader accepts; 0 and 20 are not.
  EXPECT_THROW(GgufWriter(dir / "bad-align.gguf", 0), Error);
  EXPECT_THROW(GgufWriter(dir / "bad-align.gguf", 20), Error);
  try {
    GgufWriter w(dir / "no-such-dir" / "x.gguf");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir"), std::string::npos) << e.what();
  }
  {
    GgufWriter w(dir / "misuse.gguf");
    w.add_tensor({"a", quant::GgmlType::F32, {2}});
    EXPECT_THROW(w.add_tensor({"a", quant::GgmlType::F32, {2}}), Error);           // duplicate
    EXPECT_THROW(w.add_tensor({"q", quant::GgmlType::Q4_0, {16}}), Error);         // not a block multiple
    EXPECT_THROW(w.add_tensor({"five", quant::GgmlType::F32, {1, 1, 1, 1, 1}}), Error);
    const std::vector<uint8_t> four(4, 0);
    w.write_tensor_data(four);
    try {
      w.finish();
      FAIL() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'a'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(w.write_tensor_data(std::vector<uint8_t>(8, 0)), Error);  // more than declared
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "misuse.gguf")) << "an unfinished file is removed";
  if (std::filesystem::exists("/dev/full")) {
    GgufWriter w("/dev/full");
    w.add_tensor({"a", quant::GgmlType::F32, {1 << 20}});
    EXPECT_THROW(
        {
          w.write_tensor_data(std::vector<uint8_t>(4u << 20, 0));
          w.finish();
        },
        Error);
    // The unfinished "file" is a device: removing it (as root) would take /dev/full away from every later test.
    EXPECT_TRUE(std::filesystem::is_character_file("/dev/full")) << "a failed write removed /dev/full";
  }
}

TEST(GgufSplit, ThreeShardsOpenAsTheOriginal) {
  const GgufModel src = GgufModel::open(model("tiny-qwen3moe-Q6_K.gguf"));
  const auto dir = test::tmp_dir("gguf-split");
  const auto paths = write_split(src, dir, "tq", 3);
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[0].filename(), "tq-00001-of-00003.gguf");
  EXPECT_EQ(paths[2].filename(), "tq-00003-of-00003.gguf");
  for (const auto& from : {paths[0], paths[1]}) {
    SCOPED_TRACE(from.string());
    const GgufModel m = GgufModel::open(from);
    ASSERT_EQ(m.shards().size(), 3u);
    for (const auto& sh : m.shards()) EXPECT_FALSE(sh.tensor_indices.empty());
    EXPECT_EQ(m.architecture(), src.architecture());
    EXPECT_EQ(m.metadata().get_uint("split.count"), 3u);
    EXPECT_EQ(m.metadata().get_int("split.tensors.count"), static_cast<int64_t>(src.tensors().size()));
    EXPECT_EQ(m.metadata().size(), src.metadata().size() + 3);
    EXPECT_FALSE(m.shards()[1].metadata.has("general.architecture"));
    EXPECT_EQ(m.shards()[2].metadata.get_uint("split.no"), 2u);
    expect_same_tensors(src, m);
    for (size_t i = 0; i < src.tensors().size(); ++i) EXPECT_EQ(src.tensors()[i].name, m.tensors()[i].name);
  }
}

TEST(GgufSplit, MissingOrInconsistentShardIsAnError) {
  const GgufModel src = GgufModel::open(model("stories260K.gguf"));
  const auto dir = test::tmp_dir("gguf-split-missing");
  const auto paths = write_split(src, dir, "s", 3);
  std::filesystem::remove(paths[1]);
  try {
    GgufModel::open(paths[0]);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
    EXPECT_NE(msg.find("s-00002-of-00003.gguf"), std::string::npos) << msg;
  }
  // A shard from another split in its place: split.no / split.count disagree.
  const auto other = write_split(src, test::tmp_dir("gguf-split-other"), "s", 3);
  std::filesystem::copy_file(other[2], paths[1]);
  try {
    GgufModel::open(paths[0]);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("split.no is 2, expected 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_split(src, dir, "s", 0), Error);
  EXPECT_THROW(write_split(src, dir, "s", static_cast<int>(src.tensors().size()) + 1), Error);
}

TEST(GgufSplit, RenamedShardIsRefused) {
  const GgufModel src = GgufModel::open(model("stories260K.gguf"));
  const auto dir = test::tmp_dir("gguf-split-renamed");
  const auto paths = write_split(src, dir, "r", 2);
  const auto renamed = dir / "renamed.gguf";
  std::filesystem::copy_file(paths[0], renamed, std::filesystem::copy_options::overwrite_existing);
  try {
    GgufModel::open(renamed);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NAME-0000k-of-0000N"), std::string::npos) << e.what();
  }
}

TEST(GgufSplit, SplitNames) {
  const auto n = parse_split_name("/a/b/model-00002-of-00010.gguf");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->number, 2);
  EXPECT_EQ(n->count, 10);
  EXPECT_EQ(split_file_name(n->prefix, 3, 10), std::filesystem::path("/a/b/model-00003-of-00010.gguf"));
  EXPECT_FALSE(parse_split_name("model.gguf").has_value());
  EXPECT_FALSE(parse_split_name("m-00003-of-00002.gguf").has_value());
  EXPECT_FALSE(parse_split_name("m-0000a-of-00002.gguf").has_value());
}

}  // namespace
}  // namespace moetier::gguf
