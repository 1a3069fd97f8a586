// Which weights -ngl and --n-cpu-moe put on the GPU, in llama.cpp's words:
//   -ngl N (n_gpu_layers): the products of the last N blocks (blocks n_layer - N .. n_layer - 1) read device-local
//     copies of their weights; N > n_layer also places the output head (the token embeddings when the file ties
//     them). The architectures built from the shared blocks run the placed blocks whole on the GPU
//     (model/gpu_blocks.h); for the others the norms, RoPE, attention and the activations stay on the CPU and
//     every placed product's input and output cross PCIe once per call.
//   --n-cpu-moe N (n_cpu_moe): the routed experts of blocks 0 .. N - 1 stay in RAM and run on the CPU even when
//     their block is on the GPU. Streamed experts (--experts stream) always run on the CPU.
// The plan is made from the matrices the architecture bound (gguf::TensorBinder::matrices) and the file's stacked
// expert tensors; the model places it (model/decoder.cpp) and routes each product to the GPU when the GPU holds its
// weights (compute/hybrid_backend.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/tensor_binder.h"

namespace moetier::model {

struct GpuPlacementRequest {
  int64_t n_layer = 0;
  int n_gpu_layers = 0;    // -ngl, >= 0; values above n_layer mean every block and the output head
  int n_cpu_moe = 0;       // --n-cpu-moe, >= 0
  bool experts_in_file = true;  // the routed experts are read from the file's mapping (not streamed)
  bool vram_tier = false;       // --experts-vram: no expert stack is placed; the VRAM tier holds experts in slots
};

struct GpuPlacement {
  std::vector<gguf::BoundMatrix> weights;  // each placed once; an expert tensor as one [n_expert * rows, cols] view
  int64_t first_layer = 0;     // blocks first_layer .. n_layer - 1 are on the GPU (n_layer: none)
  int64_t n_layer = 0;
  bool output = false;         // the output head is on the GPU
  bool has_experts = false;    // the file has routed experts
  int64_t expert_layers = 0;   // blocks whose routed experts are on the GPU
  int64_t first_expert_block = 0, last_expert_block = -1;  // the first and last of them (when expert_layers > 0)
  int64_t max_rows = 0;        // most rows of one product over a placed weight (an expert's rows for a stack)
  uint64_t bytes = 0;          // weight bytes placed

  // "blocks 0..3 of 4 and the output head; the routed experts of blocks 2..3 (--n-cpu-moe 2 keeps those of blocks
  // below 2 on the CPU)"
  std::string describe(const GpuPlacementRequest& r) const;
};

GpuPlacement plan_gpu_placement(const gguf::GgufModel& file, std::span<const gguf::BoundMatrix> bound,
                                const GpuPlacementRequest& r);

}  // namespace moetier::model
