#include "quant/repacked_matrices.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <thread>
#include <vector>

#include "quant/kernels/int8_kernels.h"
#include "quant/repack.h"
#include "util/anon_memory.h"

namespace moetier::quant {

bool RepackedMatrices::takes(const WeightView& w) {
  return w.memory == Memory::host && w.layout == WeightLayout::gguf && rows16_layout_fits(w.type, w.rows, w.cols) &&
         kernels::has_rows16_kernel(w.type);
}

void RepackedMatrices::Unmap::operator()(uint8_t* p) const { util::unmap_anonymous(p, bytes); }

WeightView RepackedMatrices::add(const WeightView& w) {
  assert(takes(w));
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = static_cast<size_t>(w.rows) * w.row_bytes;
  uint8_t* p = util::map_anonymous(n, "repacked weights");
  blocks_.emplace_back(p, Unmap{n});
  ++by_type_[w.type];
  // Disjoint group ranges, one per thread (kernels::repack_rows16 is thread-safe for those); a small matrix: one.
  const int64_t groups = w.rows / kRows16;
  // 64 groups of a 2048-column Q4_K matrix are 1.1 MiB, ~1 ms to repack: below that a thread's start would count.
  constexpr int64_t kMinGroupsPerThread = 64;
  const int64_t nt = std::min<int64_t>(threads_, std::max<int64_t>(groups / kMinGroupsPerThread, 1));
  if (nt == 1) {
    kernels::repack_rows16(w.type, w.data, w.row_bytes, w.cols, 0, groups, p);
  } else {
    std::vector<std::jthread> workers;
    workers.reserve(static_cast<size_t>(nt - 1));
    for (int64_t i = 1; i < nt; ++i) {
      workers.emplace_back([&, i] {
        kernels::repack_rows16(w.type, w.data, w.row_bytes, w.cols, groups * i / nt, groups * (i + 1) / nt, p);
      });
    }
    kernels::repack_rows16(w.type, w.data, w.row_bytes, w.cols, 0, groups / nt, p);
  }
  bytes_ += n;
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WeightView r = w;
  r.data = p;
  r.layout = WeightLayout::rows16;
  return r;
}

std::string RepackedMatrices::summary() const {
  std::string s;
  for (const auto& [type, n] : by_type_) {
    if (!s.empty()) s += ", ";
    s += std::to_string(n) + " " + std::string(type_name(type));
  }
  return s;
}

}  // namespace moetier::quant
