#include "moe/dense_weights.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "moe/expert_layout.h"
#include "moe/io/anon_buffer.h"
#include "util/error.h"

namespace moetier::moe {

std::string_view dense_policy_name(DensePolicy p) {
  switch (p) {
    case DensePolicy::mmap: return "mmap";
    case DensePolicy::warm: return "warm";
    case DensePolicy::anon: return "anon";
  }
  return "?";
}

DensePolicy parse_dense_policy(std::string_view s) {
  if (s == "mmap") return DensePolicy::mmap;
  if (s == "warm") return DensePolicy::warm;
  if (s == "anon") return DensePolicy::anon;
  fail("unknown dense policy '{}' (expected mmap, warm or anon)", s);
}

namespace {

struct Range {
  uint32_t shard = 0;
  uint64_t begin = 0, end = 0;  // file offsets, page-aligned for anon
  const uint8_t* base = nullptr;  // the shard's mapping (address of file offset 0)
};

// Page-aligned ranges of the dense tensors, per shard, merged where they touch or overlap.
std::vector<Range> dense_ranges(const gguf::GgufModel& model, uint64_t* dense_bytes) {
  std::vector<Range> rs;
  *dense_bytes = 0;
  for (const auto& t : model.tensors()) {
    if (ExpertLayout::is_routed_expert_tensor(t.name) || t.n_bytes == 0) continue;
    *dense_bytes += t.n_bytes;
    if (t.data == nullptr) fail("tensor '{}' has no data mapped (model opened headers-only?)", t.name);
    rs.push_back({t.shard, io::round_down(t.file_offset, io::kPage), io::round_up(t.file_offset + t.n_bytes, io::kPage),
                  t.data - t.file_offset});
  }
  std::sort(rs.begin(), rs.end(), [](const Range& a, const Range& b) {
    return a.shard != b.shard ? a.shard < b.shard : a.begin < b.begin;
  });
  std::vector<Range> merged;
  for (const Range& r : rs) {
    if (!merged.empty() && merged.back().shard == r.shard && r.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

}  // namespace

DenseReport load_dense(const gguf::GgufModel& model, const io::ModelFiles& files, DensePolicy policy) {
  const auto t0 = std::chrono::steady_clock::now();
  DenseReport rep;
  rep.policy = policy;
  const std::vector<Range> ranges = dense_ranges(model, &rep.dense_bytes);
  if (policy == DensePolicy::warm) {
    constexpr uint64_t kChunk = 4u << 20;  // bytes per sequential read
    io::AnonBuffer buf(kChunk, "dense warm-up buffer");
    for (const Range& r : ranges) {
      const int fd = files.buffered_fd(r.shard);
      posix_fadvise(fd, static_cast<off_t>(r.begin), static_cast<off_t>(r.end - r.begin), POSIX_FADV_SEQUENTIAL);
      for (uint64_t off = r.begin; off < r.end; off += kChunk) {
        const uint64_t n = std::min(kChunk, r.end - off);
        const ssize_t got = ::pread(fd, buf.data(), n, static_cast<off_t>(off));
        if (got < 0) fail("{}", files.describe_failure(r.shard, off, n, -errno));
        rep.loaded_bytes += static_cast<uint64_t>(got);
        if (static_cast<uint64_t>(got) < n) break;  // end of file inside the last page
      }
    }
  } else if (policy == DensePolicy::anon) {
    for (const Range& r : ranges) {
      const uint64_t len = r.end - r.begin;
      io::AnonBuffer buf(len, "dense weights");
      files.read_window(r.shard, r.begin, len, buf.data());  // the tail past end of file stays zero
      if (mprotect(buf.data(), len, PROT_READ) != 0) {
        fail("cannot protect the dense weights' copy of {}: {}", files.path(r.shard).string(), std::strerror(errno));
      }
      // The mapping is MAP_PRIVATE | PROT_READ and owned by `model`; replacing its pages atomically keeps every
      // address valid. The cast drops const only to name the target address.
      void* target = const_cast<uint8_t*>(r.base + r.begin);
      void* got = mremap(buf.data(), len, len, MREMAP_MAYMOVE | MREMAP_FIXED, target);
      if (got == MAP_FAILED) {
        fail("cannot move the dense weights of {} (offset {}, {} bytes) into anonymous memory: {}",
             files.path(r.shard).string(), r.begin, len, std::strerror(errno));
      }
      buf.release();  // now part of the model's mapping
      rep.loaded_bytes += len;
    }
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace moetier::moe
