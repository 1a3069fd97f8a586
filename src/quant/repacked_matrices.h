// The matrices the engine holds in the rows16 layout (quant/repack.h): repacked copies made at load, owned here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "quant/matmul.h"

namespace moetier::quant {

// Repacked copies of matrices, owned (util::map_anonymous: page-aligned, in transparent huge pages where the kernel
// has them), made at load. Not thread-safe.
class RepackedMatrices {
 public:
  // threads: how many threads add() repacks a matrix with (its own, started per call; at least 1). At load, a
  // resident model's routed experts are gigabytes, and the copy's first touch of every page costs as much as
  // the rearranging (the kernel zeroes each page).
  explicit RepackedMatrices(int threads = 1) : threads_(threads < 1 ? 1 : threads) {}

  // Whether add() repacks w: host memory in the GGUF layout, a type whose rows16 kernel this CPU has
  // (kernels::has_rows16_kernel) and a shape that fits (rows16_layout_fits).
  static bool takes(const WeightView& w);
  // The rows16 copy of w (which takes() must accept): a view of the same type and shape on memory owned here.
  WeightView add(const WeightView& w);
  size_t count() const { return blocks_.size(); }
  // The matrices repacked so far by type, "N TYPE" in the order of the type table, comma-separated ("" for none).
  std::string summary() const;
  uint64_t bytes() const { return bytes_; }
  double seconds() const { return seconds_; }  // wall time add() took, all calls together

 private:
  struct Unmap {
    size_t bytes = 0;
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, Unmap>> blocks_;  // one per matrix, [rows * row_bytes] each
  std::map<GgmlType, size_t> by_type_;                   // matrices per type
  int threads_ = 1;
  uint64_t bytes_ = 0;
  double seconds_ = 0.0;
};

}  // namespace moetier::quant
