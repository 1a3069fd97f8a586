// `moetier synth`: write a synthetic MoE model with a real architecture's shape (see synth/preset.h).
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/format.h"
#include "synth/synth.h"
#include "util/error.h"

namespace moetier::cli {

void register_synth(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "synth",
      "write a synthetic MoE model: a real architecture's tensors and metadata with random, finite weights "
      "(for benchmarks and tests: its text is meaningless)");
  struct Opts {
    std::string preset = "tiny";
    std::string type = "Q4_K_M";
    std::string output;
    std::string vocab;
    int64_t layers = 0;
    int64_t dense_lead = 0;
    uint64_t seed = 1;
    uint64_t alignment = 32;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--preset", o->preset,
                  fmt::format("model shape: {}", fmt::join(synth::preset_names(), ", ")))
      ->capture_default_str();
  cmd->add_option("--type", o->type,
                  "weight types: a mix (Q4_K_M, Q5_K_M) or one type for every matrix (Q8_0, MXFP4, Q4_K, F16, ...)")
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "output GGUF path")->required();
  cmd->add_option("--dense-lead", o->dense_lead,
                  "make the first N blocks dense (a SwiGLU FFN instead of router and experts; "
                  "leading_dense_block_count, as DeepSeek and GLM files have): for tests of MoE layer numbering")
      ->transform(whole<int64_t>(0, 4096));
  cmd->add_option("--layers", o->layers, "keep only the first N layers (0: the preset's count)")
      ->transform(whole<int64_t>(0));
  cmd->add_option("--vocab", o->vocab,
                  "take the tokenizer from this GGUF (e.g. ../shared/tokenizer/qwen3-vocab.gguf); default: a "
                  "generated SentencePiece vocabulary of the preset's size");
  cmd->add_option("--seed", o->seed, "random seed: the same seed writes the same file")
      ->capture_default_str()
      ->transform(whole<uint64_t>(0));
  // GGUF stores general.alignment as uint32: the largest power of two it holds is 2^31.
  cmd->add_option("--alignment", o->alignment,
                  "general.alignment in bytes, a power of two from 8 to 2^31 (32 as llama.cpp writes; 4096 puts every "
                  "tensor on a page)")
      ->capture_default_str()
      ->transform(whole<uint64_t>(8, uint64_t{1} << 31));
  cmd->add_flag("-q,--quiet", o->quiet, "no progress line");
  cmd->callback([o] {
    synth::SynthOptions so;
    so.shape = synth::find_preset(o->preset);
    if (o->layers > 0) {
      if (o->layers > so.shape.n_layer)
        fail("--layers {} is more than the {} layers of preset '{}'", o->layers, so.shape.n_layer, o->preset);
      so.shape.n_layer = o->layers;
    }
    if (o->dense_lead > 0) {
      if (so.shape.arch != "qwen3moe" && so.shape.arch != "llama")
        fail("--dense-lead: {} has a router and experts in every block", so.shape.arch);
      if (o->dense_lead >= so.shape.n_layer)
        fail("--dense-lead {} must be less than the {} layers (at least one MoE layer)", o->dense_lead,
             so.shape.n_layer);
      so.shape.n_dense_lead = o->dense_lead;
    }
    if (o->alignment == 0 || (o->alignment & (o->alignment - 1)) != 0 || o->alignment % 8 != 0)
      fail("--alignment {} must be a power of two and a multiple of 8", o->alignment);
    so.type = o->type;
    so.seed = o->seed;
    so.vocab = o->vocab;
    so.output = o->output;
    so.alignment = o->alignment;
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    if (!o->quiet)
      so.progress = [&](uint64_t done, uint64_t total) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::milliseconds(500) && done < total) return;
        last = now;
        const double s = std::chrono::duration<double>(now - t0).count();
        fmt::print(stderr, "\rsynth: {} / {} ({:.0f}%), {:.0f} MB/s   ", human_bytes(done), human_bytes(total),
                   total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                   s > 0 ? static_cast<double>(done) / s / 1e6 : 0.0);
        std::fflush(stderr);
      };
    const auto r = synth::write_synthetic_model(so);
    if (!o->quiet) fmt::print(stderr, "\n");
    fmt::print("wrote {}: preset {} ({} layers x {} experts, top-{}{}), type {}, {} tensors, {} ({} routed experts) "
               "in {:.1f} s ({:.0f} MB/s)\n",
               o->output, so.shape.preset, so.shape.n_layer, so.shape.n_expert, so.shape.n_expert_used,
               so.shape.n_dense_lead > 0 ? fmt::format(", the first {} dense", so.shape.n_dense_lead) : "", o->type,
               r.n_tensors, human_bytes(r.file_bytes), human_bytes(r.expert_bytes), r.seconds,
               r.seconds > 0 ? static_cast<double>(r.file_bytes) / r.seconds / 1e6 : 0.0);
    fmt::print("note: synthetic weights are random: text generated from this model is meaningless\n");
  });
}

}  // namespace moetier::cli
