// Every shared GGUF file opens, with consistent counts and all tensor data inside the file.
#include <vector>

#include "gguf/gguf.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::gguf {
namespace {

std::vector<std::filesystem::path> gguf_files_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".gguf") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Tensor count from the raw header bytes (offset 8, uint64 little-endian), independent of the parser.
uint64_t raw_tensor_count(const std::filesystem::path& p) {
  std::FILE* f = std::fopen(p.c_str(), "rb");
  EXPECT_NE(f, nullptr) << p;
  if (f == nullptr) return 0;
  uint8_t b[24] = {};
  EXPECT_EQ(std::fread(b, 1, sizeof b, f), sizeof b);
  std::fclose(f);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | b[8 + i];
  return n;
}

void check_model(const std::filesystem::path& p, bool is_model) {
  SCOPED_TRACE(p.string());
  GgufModel m = GgufModel::open(p);
  ASSERT_EQ(m.shards().size(), 1u);
  const Shard& sh = m.shards()[0];
  EXPECT_EQ(sh.file_size, std::filesystem::file_size(p));
  EXPECT_TRUE(sh.version == 2 || sh.version == 3);
  EXPECT_EQ(m.tensors().size(), raw_tensor_count(p));
  EXPECT_GT(m.metadata().size(), 0u);
  if (is_model) {
    EXPECT_FALSE(m.architecture().empty());
    EXPECT_GT(m.tensors().size(), 0u);
  }
  for (const TensorInfo& t : m.tensors()) {
    EXPECT_EQ(t.file_offset, sh.data_section_offset + t.data_offset) << t.name;
    EXPECT_LE(t.file_offset + t.n_bytes, sh.file_size) << t.name;
    EXPECT_EQ(t.file_offset % sh.alignment, 0u) << t.name;
    EXPECT_EQ(t.n_bytes, t.row_bytes() * static_cast<uint64_t>(t.n_elements() / t.ne[0])) << t.name;
    if (t.n_bytes > 0) {
      EXPECT_NE(t.data, nullptr) << t.name;
    }
    EXPECT_EQ(m.find(t.name), &t);
  }
}

TEST(GgufReadShared, EveryOracleModelOpens) {
  const auto files = gguf_files_in(test::oracle_dir() / "models");
  ASSERT_GE(files.size(), 17u);
  for (const auto& p : files) check_model(p, true);
}

TEST(GgufReadShared, EveryTokenizerVocabOpens) {
  const auto files = gguf_files_in(test::shared_dir() / "tokenizer");
  ASSERT_GE(files.size(), 6u);
  for (const auto& p : files) {
    check_model(p, false);
    GgufModel m = GgufModel::open(p);
    EXPECT_GT(m.metadata().get_string_array("tokenizer.ggml.tokens").size(), 0u) << p;
  }
}

TEST(GgufReadShared, MetadataGettersOnStories) {
  GgufModel m = GgufModel::open(test::oracle_dir() / "models" / "stories260K.gguf");
  EXPECT_EQ(m.architecture(), "llama");
  const Metadata& md = m.metadata();
  EXPECT_GT(md.get_uint("llama.block_count"), 0u);
  EXPECT_GT(md.get_int("llama.embedding_length"), 0);
  EXPECT_GT(md.get_float("llama.attention.layer_norm_rms_epsilon"), 0.0);
  EXPECT_EQ(md.get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(md.get_float_array("tokenizer.ggml.scores").size(), 512u);
  EXPECT_EQ(md.get_int_array("tokenizer.ggml.token_type").size(), 512u);
  EXPECT_EQ(md.get_uint_or("no.such.key", 7), 7u);
  EXPECT_EQ(md.get_string_or("no.such.key", "x"), "x");
  try {
    md.get_uint("no.such.key");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no.such.key' is missing"), std::string::npos) << e.what();
  }
  try {
    md.get_uint("general.architecture");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("string"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.get("no.such.tensor"), Error);
  EXPECT_EQ(m.find("no.such.tensor"), nullptr);
  EXPECT_NE(m.find("token_embd.weight"), nullptr);
}

TEST(GgufReadShared, HeaderOnlyOpenHasNoDataPointers) {
  OpenOptions o;
  o.map_data = false;
  GgufModel m = GgufModel::open(test::oracle_dir() / "models" / "tiny-gptoss-MXFP4.gguf", o);
  ASSERT_FALSE(m.tensors().empty());
  for (const auto& t : m.tensors()) EXPECT_EQ(t.data, nullptr);
}

TEST(GgufReadShared, MissingFileNamesThePath) {
  try {
    GgufModel::open(test::tmp_dir("gguf") / "does-not-exist.gguf");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does-not-exist.gguf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moetier::gguf
