// Where the dense weights (every tensor that is not a routed expert: embeddings, attention, norms, routers,
// output) live while experts stream:
//   mmap — left to the page cache through the model's mapping (pages fault in on first use);
//   warm — the same, after one sequential buffered pass over the dense byte ranges at load, so the first tokens
//          do not fault pages in one by one;
//   anon — read with direct I/O into anonymous memory, which then replaces the mapping's pages at the same
//          addresses (mremap MREMAP_FIXED over the page-aligned dense ranges). Every pointer the model already
//          holds or will take from gguf::TensorInfo::data stays valid and now reads the private copy, which the
//          kernel cannot drop or re-read under memory pressure the way it can file pages. Pages shared with an
//          expert tensor at a range's edge are copied too (with the file's bytes, so nothing changes for readers);
//          the model's munmap at close releases the copy with the mapping.
#pragma once

#include <cstdint>
#include <string_view>

#include "gguf/gguf.h"
#include "moe/io/model_files.h"

namespace moetier::moe {

enum class DensePolicy { mmap, warm, anon };
std::string_view dense_policy_name(DensePolicy p);
// "mmap" / "warm" / "anon"; throws moetier::Error naming the value and the choices otherwise.
DensePolicy parse_dense_policy(std::string_view s);

struct DenseReport {
  DensePolicy policy = DensePolicy::mmap;
  uint64_t dense_bytes = 0;   // bytes of the dense tensors
  uint64_t loaded_bytes = 0;  // bytes read at load (warm) or copied into anonymous memory (anon), page-rounded
  double seconds = 0.0;       // load time
};

// Applies `policy` to the dense tensors of `model` (opened with map_data), reading through `files` (the model's
// shards, as StreamingExperts opens them, or a ModelFiles of its own). Call once, before the first forward.
// Throws moetier::Error naming the file and offset on a read error (anon leaves the mapping untouched for the
// range that failed), or when anonymous memory cannot be allocated.
DenseReport load_dense(const gguf::GgufModel& model, const io::ModelFiles& files, DensePolicy policy);

}  // namespace moetier::moe
