// The last expert of a file that ends mid-page: a direct read's window is rounded to whole pages, and rounding
// the last one up would ask for bytes past the end of the file (O_DIRECT then reads short, or refuses the
// unaligned rest). The window is clipped at the end of the file and its tail read buffered: every planned read
// ends at or before the end of the file, both read engines return exactly the tail's bytes, and a streamed run
// over such a file (direct I/O, no cache, so every expert is read every time) is bit-identical to the resident
// run.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "gguf/tensor_binder.h"
#include "gguf/writer.h"
#include "moe/expert_layout.h"
#include "moe/expert_store.h"
#include "moe/io/anon_buffer.h"
#include "moe/io/model_files.h"
#include "moe/io/read_engine.h"
#include "moe/streaming_experts.h"
#include "stream_test_util.h"

namespace moetier::moe {
namespace {

namespace fs = std::filesystem;

// `name` rewritten with the last MoE block's ffn_down_exps.weight moved to the end of the file, so the file's
// last bytes are its last expert's. Written once per build tree (publish_once: ctest runs tests in parallel).
fs::path expert_last_copy(const std::string& name) {
  const fs::path dest = moetier::test::tmp_dir("stream_direct_tail") / (name + "-expert-last.gguf");
  if (fs::exists(dest)) return dest;
  const auto src = gguf::GgufModel::open(test::model_path(name));
  const auto layout = ExpertLayout::from_model(src);
  const std::string last = gguf::block_tensor(layout.layers().back().layer, "ffn_down_exps.weight");
  std::vector<const gguf::TensorInfo*> order;
  for (const auto& t : src.tensors()) {
    if (t.name != last) order.push_back(&t);
  }
  order.push_back(&src.get(last));
  const fs::path part = dest.string() + "." + std::to_string(::getpid());
  {
    gguf::GgufWriter w(part, src.shards().front().alignment);
    w.set_metadata(src.metadata());
    for (const auto* t : order) {
      w.add_tensor({t->name, t->type, std::vector<int64_t>(t->ne.begin(), t->ne.begin() + t->n_dims)});
    }
    for (const auto* t : order) w.write_tensor_data({t->data, static_cast<size_t>(t->n_bytes)});
    w.finish();
  }
  moetier::test::publish_once(part, dest);
  return dest;
}

class DirectTail : public ::testing::TestWithParam<std::string> {};

// Every read the store plans ends at or before the end of its file; the last expert's last slice, which ends in
// the file's partial last page, is clipped exactly there.
TEST_P(DirectTail, NoWindowRunsPastTheEndOfTheFile) {
  const fs::path p = expert_last_copy(GetParam());
  const auto file = gguf::GgufModel::open(p);
  const uint64_t size = file.shards()[0].file_size;
  ASSERT_NE(size % io::kPage, 0u) << "the case needs a file that ends mid-page";
  const ExpertStore store(file);
  const ExpertShape& sh = store.shape();
  const int64_t last_layer = sh.n_moe_layers - 1;
  const auto last_expert = static_cast<int32_t>(sh.n_expert - 1);
  bool clipped = false;
  for (int64_t l = 0; l < sh.n_moe_layers; ++l) {
    for (int32_t e = 0; e < sh.n_expert; ++e) {
      for (int s = 0; s < store.n_slices(l); ++s) {
        const SliceRead r = store.slice_read(l, e, s);
        ASSERT_LE(r.file_offset + r.length, size) << "layer " << l << " expert " << e << " slice " << s;
        ASSERT_LE(r.need, r.length);
        ASSERT_TRUE(r.length % io::kPage == 0 || r.file_offset + r.length == size);
        // Rounded up to a whole page, this slice's window would end past the end of the file.
        if (io::round_up(r.file_offset + r.need, io::kPage) > size) {
          clipped = true;
          EXPECT_EQ(l, last_layer);
          EXPECT_EQ(e, last_expert);
          EXPECT_EQ(r.file_offset + r.length, size);
        }
      }
    }
  }
  EXPECT_TRUE(clipped) << "no slice ends in the file's last, partial page";
}

// Both engines, direct I/O on: a window of whole pages and the file's partial last page returns exactly its
// bytes, as a buffered read of the same range does.
TEST_P(DirectTail, EnginesReadTheUnalignedTailExactly) {
  const fs::path p = expert_last_copy(GetParam());
  const io::ModelFiles files({p}, io::FileOptions{true, {}});
  ASSERT_TRUE(files.direct()) << files.direct_note();
  const uint64_t size = files.size(0);
  ASSERT_NE(size % io::kPage, 0u);
  const uint64_t offset = io::round_down(size, io::kPage) - 2 * io::kPage;
  const uint64_t length = size - offset;  // two whole pages and the partial last one
  std::vector<uint8_t> want(static_cast<size_t>(length));
  ASSERT_EQ(::pread(files.buffered_fd(0), want.data(), want.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(length));
  for (const auto kind : {io::EngineKind::pread_pool, io::EngineKind::uring}) {
    SCOPED_TRACE(std::string(io::engine_name(kind)));
    io::AnonBuffer dst(io::round_up(length, io::kPage), "test");
    std::memset(dst.data(), 0xAB, static_cast<size_t>(io::round_up(length, io::kPage)));
    const auto engine = io::make_read_engine(files, io::EngineOptions{kind, 2, -1}, 4);
    engine->submit(io::ReadOp{0, offset, length, dst.data(), 7});
    const io::ReadDone d = engine->wait();
    EXPECT_EQ(d.tag, 7u);
    ASSERT_EQ(d.result, static_cast<int64_t>(length));
    EXPECT_EQ(std::memcmp(dst.data(), want.data(), want.size()), 0);
    EXPECT_EQ(dst.data()[length], 0xAB) << "a byte past the end of the file was written";
  }
  io::AnonBuffer aligned(io::round_up(length, io::kPage), "test");
  EXPECT_EQ(files.read_window(0, offset, length, aligned.data()), length);
  EXPECT_EQ(std::memcmp(aligned.data(), want.data(), want.size()), 0);
}

// A streamed run over the file (no cache: every expert, the last one included, is read on every use) gives the
// resident run's logits and routing, bit for bit, with either engine.
TEST_P(DirectTail, StreamedRunEqualsResident) {
  const fs::path p = expert_last_copy(GetParam());
  const auto file = gguf::GgufModel::open(p);
  const auto t = test::oracle_tokens(GetParam(), "p1", 4);
  model::ModelOptions opts;
  opts.n_ctx = 128;
  const auto resident = model::load_model(file, opts);
  const model::EvalResult want = model::evaluate(*resident, t.tokens, t.n_prefill);
  for (const auto kind : {io::EngineKind::pread_pool, io::EngineKind::uring}) {
    SCOPED_TRACE(std::string(io::engine_name(kind)));
    StreamingOptions so;
    so.cache_bytes = 0;
    so.engine = kind;
    so.direct = true;
    auto src = std::make_unique<StreamingExperts>(file, so);
    StreamingExperts* s = src.get();
    ASSERT_TRUE(s->files().direct()) << s->files().direct_note();
    const auto m = model::load_model(file, opts, std::move(src));
    const model::EvalResult got = model::evaluate(*m, t.tokens, t.n_prefill);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), want.logits.size() * sizeof(float)), 0);
    EXPECT_EQ(got.routing, want.routing);
    EXPECT_GT(s->totals().misses, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Micro, DirectTail, ::testing::Values("micro-qwen3moe-F16", "micro-gptoss-F16"),
                         [](const auto& i) { return test::param_name(i.param); });

}  // namespace
}  // namespace moetier::moe
