// Derived sizes and display of tensor infos.
#include "gguf/gguf.h"
#include "util/error.h"

namespace moetier::gguf {

uint64_t TensorInfo::row_bytes() const { return quant::row_bytes(type, ne[0]); }

std::string TensorInfo::shape_string() const {
  std::string out = "[";
  for (uint32_t i = 0; i < n_dims && i < 4; ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}", ne[i]);
  }
  return out + "]";
}

}  // namespace moetier::gguf
