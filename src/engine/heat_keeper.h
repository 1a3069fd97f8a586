// The heat profile of a streamed run on disk (moe/heat_profile.h): where it is kept (EngineConfig::heat), the
// warm start of the expert cache (EngineConfig::cache_warm) before the first token, and its saves: at the end of
// a run that decoded (Engine::finish) and, for long runs (chat, serve), between steps every kSaveEverySeconds.
//
//   heat "auto": $MOETIER_CACHE_DIR, else $XDG_CACHE_HOME/moetier, else ~/.cache/moetier, then
//                heat/<model file name>-<xxh64 of its absolute path, 16 hex>.json; the directory is created.
//                The run's counts go on from the kept profile when it fits the model, whatever the warm start
//                reads, so --cache-warm off or FILE does not reset them.
//   cache_warm "auto": from the kept profile when there is one that fits (else a cold start, logged), except
//              when a route trace is recorded (replay reproduces a cold start row by row);
//              a path: from that file, and an error when it cannot be read or was counted on another model.
// Not in the model's directory: that is the user's (often read-only, or shared between machines).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "engine/engine_config.h"
#include "engine/expert_setup.h"
#include "gguf/gguf.h"
#include "moe/streaming_experts.h"

namespace moetier::engine {

class HeatKeeper {
 public:
  static constexpr double kSaveEverySeconds = 300.0;

  // Resolves the profile's path, seeds the stream's counts from the kept profile and warm-starts its cache,
  // logging each decision through `log` ("heat profile: ...", "cache warm: ..."); `later` receives the lines of
  // later saves (failures). A kept profile that cannot be read or does not fit is logged and replaced. Throws
  // moetier::Error naming the path for a --cache-warm FILE that cannot be read, is not a profile or was counted
  // on another model, for a --heat path that exists and is not a regular file, and for a failed read.
  HeatKeeper(moe::StreamingExperts& stream, const gguf::GgufModel& file, const EngineConfig& cfg,
             const DecisionLog& log, std::function<void(std::string_view)> later);

  // Between steps: saves when kSaveEverySeconds have passed since the last save and decode has run since.
  void maybe_save();
  // Saves now when decode has run since the last save (or the start). Never throws: a failure is reported once through `later`
  // and no save is tried again.
  void save();
  // What the warm start did, for the metrics CSV's settings: "off", "none", or "N experts, M MiB read in S s"
  // (the warm read comes before the first step, so the steps' read_bytes and times leave it out).
  const std::string& warm_summary() const { return warm_summary_; }

 private:
  moe::StreamingExperts& stream_;
  std::filesystem::path path_;  // empty: not kept
  std::function<void(std::string_view)> later_;
  std::chrono::steady_clock::time_point last_save_;
  int64_t saved_tokens_ = 0;    // stream_.heat().decode_tokens() at the last save (or as seeded): unchanged, no save
  bool failed_ = false;
  std::string warm_summary_ = "off";
};

// The "auto" heat path of `file` (see above), or empty when no cache directory can be named (no HOME).
std::filesystem::path default_heat_path(const gguf::GgufModel& file);

}  // namespace moetier::engine
