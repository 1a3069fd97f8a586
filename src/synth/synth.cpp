#include "synth/synth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "gguf/writer.h"
#include "synth/model_plan.h"
#include "synth/random_blocks.h"
#include "synth/rng.h"
#include "synth/synth_vocab.h"
#include "util/error.h"

namespace moetier::synth {
namespace {

constexpr uint64_t kChunkBytes = 8u << 20;  // generation buffer; bounds synth's memory whatever the model size

// Elements [first, first + n_elems) of tensor `t` into dst.
void fill_tensor_chunk(const PlannedTensor& t, uint8_t* dst, int64_t first, int64_t n_elems, Rng& rng) {
  auto put = [&](int64_t i, float v) { std::memcpy(dst + 4 * i, &v, 4); };
  switch (t.role) {
    case Role::norm:
    case Role::gain:
      // Around the neutral value (norm gains near 1, as trained models have; see model_plan.h), spread +-std.
      fill_random(quant::GgmlType::F32, dst, n_elems, t.std, rng);
      for (int64_t i = 0; i < n_elems; ++i) {
        float v;
        std::memcpy(&v, dst + 4 * i, 4);
        put(i, v + t.center);
      }
      return;
    case Role::rope_freqs:
      for (int64_t i = 0; i < n_elems; ++i) put(i, first + i < t.n_rotated ? 1.0f : 1e30f);
      return;
    default:
      fill_random(t.spec.type, dst, n_elems, t.std, rng);
  }
}

}  // namespace

SynthResult write_synthetic_model(const SynthOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const QuantMix mix = parse_quant_mix(opts.type);
  const gguf::Metadata vocab = opts.vocab.empty() ? make_default_vocab(opts.shape.n_vocab) : load_vocab(opts.vocab);
  const ModelPlan plan = plan_model(opts.shape, mix, vocab);

  gguf::GgufWriter w(opts.output, opts.alignment);
  w.set_metadata(plan.metadata);
  for (const auto& t : plan.tensors) w.add_tensor(t.spec);
  w.write_header();

  std::vector<uint8_t> buf(kChunkBytes);
  uint64_t done = 0;
  for (size_t ti = 0; ti < plan.tensors.size(); ++ti) {
    const PlannedTensor& t = plan.tensors[ti];
    // One generator per tensor, seeded from (seed, tensor index): the bytes do not depend on chunking.
    Rng rng(opts.seed * 0x100000001b3ULL + ti);
    const auto& tr = quant::traits(t.spec.type);
    const int64_t n_elems = [&] {
      int64_t n = 1;
      for (int64_t d : t.spec.ne) n *= d;
      return n;
    }();
    // Whole blocks per chunk, as many as fit in the buffer.
    const int64_t blocks_per_chunk = static_cast<int64_t>(kChunkBytes / tr.type_size);
    const int64_t elems_per_chunk = blocks_per_chunk * tr.block_size;
    for (int64_t e = 0; e < n_elems; e += elems_per_chunk) {
      const int64_t n = std::min(elems_per_chunk, n_elems - e);
      const size_t bytes = quant::row_bytes(t.spec.type, n);
      fill_tensor_chunk(t, buf.data(), e, n, rng);
      w.write_tensor_data({buf.data(), bytes});
      done += bytes;
      if (opts.progress) opts.progress(done, plan.total_bytes);
    }
  }
  w.finish();

  SynthResult r;
  r.file_bytes = w.bytes_written();
  r.expert_bytes = plan.expert_bytes;
  r.n_tensors = plan.tensors.size();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace moetier::synth
