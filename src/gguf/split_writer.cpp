// write_split: one model rewritten as gguf-split shards.
#include <algorithm>
#include <limits>

#include "gguf/split_name.h"
#include "gguf/writer.h"
#include "util/error.h"

namespace moetier::gguf {
namespace {

// Data is copied through this many bytes at a time so memory stays constant whatever the tensor size.
constexpr uint64_t kChunkBytes = 16u << 20;

// First tensor index of each shard: in order, cutting when a shard reaches its share of the bytes, while leaving
// at least one tensor for every shard still to come.
std::vector<size_t> shard_starts(const std::vector<TensorInfo>& ts, int n_shards) {
  uint64_t total = 0;
  for (const auto& t : ts) total += t.n_bytes;
  std::vector<size_t> starts{0};
  uint64_t done = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const size_t shard = starts.size() - 1;
    const size_t shards_after = static_cast<size_t>(n_shards) - 1 - shard;
    const bool has_one = i > starts.back();
    const bool share_reached =
        static_cast<long double>(done) >= static_cast<long double>(total) * static_cast<long double>(shard + 1) /
                                               static_cast<long double>(n_shards);
    const bool must_cut = ts.size() - i == shards_after;
    if (shards_after > 0 && has_one && (share_reached || must_cut)) starts.push_back(i);
    done += ts[i].n_bytes;
  }
  return starts;
}

}  // namespace

std::vector<std::filesystem::path> write_split(const GgufModel& src, const std::filesystem::path& out_dir,
                                               const std::string& stem, int n_shards) {
  const auto& ts = src.tensors();
  if (n_shards < 1 || n_shards > std::numeric_limits<uint16_t>::max() || static_cast<size_t>(n_shards) > ts.size())
    fail("{}: cannot split {} tensors into {} shards (expected 1..{})", src.path().string(), ts.size(), n_shards,
         std::min<size_t>(ts.size(), std::numeric_limits<uint16_t>::max()));
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) fail("{}: cannot create directory: {}", out_dir.string(), ec.message());

  const std::vector<size_t> starts = shard_starts(ts, n_shards);
  const uint64_t alignment = src.shards().front().alignment;
  std::vector<std::filesystem::path> paths;
  for (int k = 0; k < n_shards; ++k) {
    const std::filesystem::path path = split_file_name(out_dir / stem, k + 1, n_shards);
    Metadata md;
    if (k == 0) {
      md = src.metadata();
      md.erase(kSplitNo);
      md.erase(kSplitCount);
      md.erase(kSplitTensorsCount);
    }
    md.set(kSplitNo, Value::of_uint16(static_cast<uint16_t>(k)));
    md.set(kSplitCount, Value::of_uint16(static_cast<uint16_t>(n_shards)));
    md.set(kSplitTensorsCount, Value::of_int32(static_cast<int32_t>(ts.size())));

    GgufWriter w(path, alignment);
    w.set_metadata(md);
    const size_t begin = starts[static_cast<size_t>(k)];
    const size_t end = static_cast<size_t>(k) + 1 < starts.size() ? starts[static_cast<size_t>(k) + 1] : ts.size();
    for (size_t i = begin; i < end; ++i)
      w.add_tensor(TensorSpec{ts[i].name, ts[i].type, std::vector<int64_t>(ts[i].ne.begin(),
                                                                              ts[i].ne.begin() + ts[i].n_dims)});
    w.write_header();
    for (size_t i = begin; i < end; ++i) {
      const TensorInfo& t = ts[i];
      if (t.n_bytes > 0 && t.data == nullptr)
        fail("{}: tensor '{}' has no mapped data (open the model with map_data to split it)", src.path().string(),
             t.name);
      for (uint64_t off = 0; off < t.n_bytes; off += kChunkBytes) {
        const uint64_t n = std::min(kChunkBytes, t.n_bytes - off);
        w.write_tensor_data({t.data + off, static_cast<size_t>(n)});
      }
    }
    w.finish();
    paths.push_back(path);
  }
  return paths;
}

}  // namespace moetier::gguf
