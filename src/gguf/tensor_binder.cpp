#include "gguf/tensor_binder.h"

#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quant/dequant_ref.h"
#include "util/error.h"

namespace moetier::gguf {

namespace {

std::string shape_of(std::initializer_list<int64_t> ne) { return fmt::format("[{}]", fmt::join(ne, ", ")); }

}  // namespace

std::string block_tensor(int64_t layer, const char* suffix) { return fmt::format("blk.{}.{}", layer, suffix); }

std::optional<int64_t> block_index(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  int64_t v = 0;
  const char* b = name.data() + 4;
  const char* e = name.data() + name.size();
  const auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p == b || p == e || *p != '.' || v < 0) return std::nullopt;
  return v;
}

const TensorInfo& TensorBinder::tensor(const std::string& name, std::initializer_list<int64_t> ne) const {
  const TensorInfo* t = file_.find(name);
  if (t == nullptr) fail("tensor '{}' is missing from {} (expected shape {})", name, file_.path().string(), shape_of(ne));
  bool ok = t->n_dims == ne.size();
  size_t i = 0;
  for (int64_t d : ne) ok = ok && t->ne[i++] == d;
  if (!ok) fail("tensor '{}' has shape {}, expected {}", name, t->shape_string(), shape_of(ne));
  const auto& tr = quant::traits(t->type);
  if (!tr.can_dequantize) fail("tensor '{}' has type {}, which moetier cannot compute with yet", name, quant::type_name(t->type));
  if (t->data == nullptr) fail("tensor '{}' has no data mapped (file opened headers-only?)", name);
  return *t;
}

quant::WeightView TensorBinder::matrix(const std::string& name, int64_t cols, int64_t rows) const {
  const TensorInfo& t = tensor(name, {cols, rows});
  quant::WeightView w{t.type, t.data, rows, cols, quant::row_bytes(t.type, cols)};
  if (repack_ != nullptr && name != "token_embd.weight" && quant::RepackedMatrices::takes(w)) {
    auto it = repacked_.find(t.data);
    if (it == repacked_.end()) it = repacked_.emplace(t.data, repack_->add(w)).first;
    w = it->second;
  }
  matrices_.push_back({name, w});
  return w;
}

quant::WeightView TensorBinder::matrix_stack(const std::string& name, int64_t cols, int64_t rows, int64_t n) const {
  const TensorInfo& t = tensor(name, {cols, rows, n});
  const quant::WeightView w{t.type, t.data, rows * n, cols, quant::row_bytes(t.type, cols)};
  matrices_.push_back({name, w});
  return w;
}

std::vector<float> TensorBinder::vector(const std::string& name, int64_t n) const {
  const TensorInfo& t = tensor(name, {n});
  std::vector<float> v(static_cast<size_t>(n));
  quant::dequantize_row_ref(t.type, t.data, v.data(), n);
  return v;
}

std::vector<float> TensorBinder::optional_vector(const std::string& name, int64_t n) const {
  if (!has(name)) return {};
  return vector(name, n);
}

const float* TensorBinder::f32_in_place(const std::string& name, std::initializer_list<int64_t> ne) const {
  const TensorInfo& t = tensor(name, ne);
  if (t.type != quant::GgmlType::F32) fail("tensor '{}' has type {}, expected F32", name, quant::type_name(t.type));
  return reinterpret_cast<const float*>(t.data);
}

}  // namespace moetier::gguf
