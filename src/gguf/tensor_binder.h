// Binding named GGUF tensors to views, with the checks that turn a wrong file into a sentence: a missing tensor,
// a shape other than expected, or a type moetier cannot compute with each throw moetier::Error naming the tensor,
// the expected and the found value (after calm's tensors.c habit).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "quant/matmul.h"
#include "quant/repacked_matrices.h"

namespace moetier::gguf {

// A matrix bound by TensorBinder::matrix or matrix_stack: what the model's products read, by tensor name (the GPU
// placement chooses among them by block, model/gpu_placement.h).
struct BoundMatrix {
  std::string name;
  quant::WeightView view;
};

class TensorBinder {
 public:
  explicit TensorBinder(const GgufModel& file) : file_(file) {}

  bool has(const std::string& name) const { return file_.find(name) != nullptr; }

  // The tensor `name` with GGUF shape `ne` (ne[0] contiguous); any type with a dequantizer.
  const TensorInfo& tensor(const std::string& name, std::initializer_list<int64_t> ne) const;

  // A matrix of `rows` rows of `cols` elements: GGUF shape [cols, rows]. With repack_into set, a matrix that
  // RepackedMatrices::takes (other than token_embd.weight, whose rows are looked up) is a repacked copy, made once
  // per tensor.
  quant::WeightView matrix(const std::string& name, int64_t cols, int64_t rows) const;

  // From now on matrix() hands out repacked copies (quant/repack.h) made into `into` (not owned; must outlive the
  // views): for a model whose products all run on the CPU with the integer kernels. With `experts`, the resident
  // routed experts' stacks are repacked into it too (expert_repack_target), their file pages evicted from the page
  // cache with `evict` (evict_expert_pages).
  void repack_into(quant::RepackedMatrices* into, bool experts = false, bool evict = false) {
    repack_ = into;
    repack_experts_ = experts;
    evict_expert_pages_ = evict;
  }
  // Where a resident expert source repacks the stacks it binds (moe::ResidentExperts): repack_into's target when
  // it took the experts, else null. matrix_stack() itself always views the file.
  quant::RepackedMatrices* expert_repack_target() const { return repack_experts_ ? repack_ : nullptr; }
  bool evict_expert_pages() const { return evict_expert_pages_; }

  // A stack of `n` matrices [cols, rows, n] viewed as one matrix of n * rows rows (index first).
  quant::WeightView matrix_stack(const std::string& name, int64_t cols, int64_t rows, int64_t n) const;

  // A vector of n elements (norm weights, biases, sinks), dequantized to an owned float copy.
  std::vector<float> vector(const std::string& name, int64_t n) const;
  // As vector(), or empty when the tensor is absent.
  std::vector<float> optional_vector(const std::string& name, int64_t n) const;

  // A float32 tensor of shape `ne` read in place (stacked expert biases): pointer into the mapping.
  const float* f32_in_place(const std::string& name, std::initializer_list<int64_t> ne) const;

  // Every matrix() and matrix_stack() bound so far, in binding order (a tensor bound twice appears twice).
  const std::vector<BoundMatrix>& matrices() const { return matrices_; }

 private:
  const GgufModel& file_;
  // Binding records what it bound; the binder is otherwise read-only, so the record is the one mutable part.
  mutable std::vector<BoundMatrix> matrices_;
  quant::RepackedMatrices* repack_ = nullptr;
  bool repack_experts_ = false;
  bool evict_expert_pages_ = false;
  mutable std::map<const uint8_t*, quant::WeightView> repacked_;  // by the tensor's bytes in the mapping
};

// "blk.3.attn_q.weight" from (3, "attn_q.weight").
std::string block_tensor(int64_t layer, const char* suffix);
// The block index N of a "blk.N.<suffix>" name (decimal, fits int64); nullopt for any other name.
std::optional<int64_t> block_index(std::string_view name);

}  // namespace moetier::gguf
