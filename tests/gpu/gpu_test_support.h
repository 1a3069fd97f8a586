// Shared by the GPU tests: the backend on the first Vulkan device (lavapipe in CI) under the Khronos validation
// layer with synchronization validation, whose error count every test checks at its end; float activations unless a test asks for the rounding.
#pragma once

#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

#include "gpu/gpu.h"

namespace moetier::gpu::testing {

inline std::unique_ptr<GpuBackend> validated_backend(int64_t max_cols, int64_t max_rows, int64_t max_tok,
                                                     uint64_t max_buffer_bytes = 0,
                                                     quant::ActivationRounding rounding =
                                                         quant::ActivationRounding::exact) {
  // With synchronization validation: a missing barrier between the step's kernels is an error too.
  setenv("MOETIER_VULKAN_VALIDATION", "sync", 1);
  GpuOptions o;
  o.validation = true;
  o.max_cols = max_cols;
  o.max_rows = max_rows;
  o.max_tok = max_tok;
  o.max_buffer_bytes = max_buffer_bytes;
  o.rounding = rounding;
  return make_backend(o);
}

}  // namespace moetier::gpu::testing
