// The heat profile: a decayed count of how often decode routed each (MoE layer, expert), kept by the streaming
// expert store while it runs, saved at the end of a run, and read at the next start to fill the RAM expert cache
// with the hottest experts before the first token (a warm start; CachePolicy::warm, StreamingExperts::warm).
// A cold cache spends its first ~50 decode tokens climbing to its steady hit rate (the phone engine's trace: LRU
// at 4000 MiB is at 55% over the first 16 tokens against 80% over all 128), longer than most chat replies.
//
// Counts: each decode step adds 1 to every (layer, expert) it routed (a distinct expert of a layer's batch), then
// every count fades by kDecayPerToken. A profile read at start seeds the counts, so they carry over from run to
// run with the same fade per decode token: what a profile says is the recent routing of the model over runs,
// not of one prompt. Prefill is not counted: a prompt touches most experts once; the warm start is for decode.
//
// File (JSON, written whole to a temporary file and renamed over the old one, so a crash leaves the old one; of
// two runs saving the same profile the last one wins, each run's counts having started from the profile as it
// was when the run started):
//   {"format": "moetier heat profile", "version": 1, "model": "<file name>", "arch": "qwen3moe",
//    "file_bytes": N, "n_moe_layers": L, "n_expert": E, "decay_per_token": 0.995, "decode_tokens": T,
//    "heat": [[E counts of MoE layer 0], ..., [E counts of layer L-1]]}
// `decode_tokens` counts every decode step the counts have seen, over all runs; counts are finite and >= 0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "moe/cache_policy.h"

namespace moetier::moe {

// What a profile was counted on. Routing depends on the model's weights, not on their quantization: a profile of
// one quantization of a model fits another (same arch, MoE layers and experts), so only those three must match.
struct HeatModel {
  std::string model;        // file name of the GGUF (the first shard's), for the reader
  std::string arch;         // general.architecture
  uint64_t file_bytes = 0;  // all shards; 0 when unknown (a profile made from a route trace)
  int32_t n_moe_layers = 0;
  int32_t n_expert = 0;
};

class HeatProfile {
 public:
  // Per decode token: half-life of ~140 tokens, so a profile follows the model's recent use over a few replies
  // while one reply's topic does not erase it.
  static constexpr double kDecayPerToken = 0.995;

  HeatProfile() = default;
  // All counts zero. Throws moetier::Error when n_moe_layers or n_expert is not positive.
  explicit HeatProfile(HeatModel model);

  // One decode step's distinct experts of MoE layer `layer` (ids in [0, n_expert), as the store checked).
  void record(int32_t layer, std::span<const int32_t> experts);
  // End of a decode step: every count fades by kDecayPerToken.
  void end_decode_step();
  // Takes `older`'s counts and token count as its own starting point (a profile read at start). Throws
  // moetier::Error when it was counted on a model of another arch or shape (see HeatModel).
  void seed(const HeatProfile& older);

  // Every (layer, expert) with a count above zero, hottest first (ties: lower layer, then lower expert first).
  std::vector<ExpertKey> hottest() const;
  double heat(ExpertKey k) const { return counts_[index(k)]; }
  int64_t decode_tokens() const { return decode_tokens_; }
  const HeatModel& model() const { return model_; }
  // "" when a profile of `m` fits this one's counts (arch, n_moe_layers, n_expert equal), else why not.
  std::string mismatch(const HeatModel& m) const;

  // Writes the file (see above). Throws moetier::Error naming the path and the system's reason on failure.
  void save(const std::filesystem::path& path) const;
  // Reads a file save() wrote. Throws moetier::Error naming the path for an unreadable file, invalid JSON, another
  // format or version, a missing or mistyped field, a shape above 2^20 layers x experts, counts of the wrong
  // shape, or a count outside 0..1 / (1 - kDecayPerToken).
  static HeatProfile load(const std::filesystem::path& path);

 private:
  size_t index(ExpertKey k) const {
    return static_cast<size_t>(k.layer) * static_cast<size_t>(model_.n_expert) + static_cast<size_t>(k.expert);
  }

  HeatModel model_;
  std::vector<double> counts_;  // [n_moe_layers * n_expert], layer-major
  int64_t decode_tokens_ = 0;
};

}  // namespace moetier::moe
