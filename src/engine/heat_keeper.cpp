#include "engine/heat_keeper.h"

#include <cstdlib>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <xxhash.h>

#include "moe/heat_profile.h"
#include "util/error.h"

namespace moetier::engine {
namespace {

constexpr double kMiB = 1048576.0;

std::filesystem::path cache_dir() {
  const auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
  if (const auto d = env("MOETIER_CACHE_DIR")) return *d;
  if (const auto d = env("XDG_CACHE_HOME")) return std::filesystem::path(*d) / "moetier";
  if (const auto d = env("HOME")) return std::filesystem::path(*d) / ".cache" / "moetier";
  return {};
}

}  // namespace

std::filesystem::path default_heat_path(const gguf::GgufModel& file) {
  const std::filesystem::path dir = cache_dir();
  if (dir.empty()) return {};
  const std::filesystem::path model = file.shards().front().path;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(model, ec);
  const std::string key = (ec ? model : abs).lexically_normal().string();
  return dir / "heat" / fmt::format("{}-{:016x}.json", model.filename().string(), XXH64(key.data(), key.size(), 0));
}

HeatKeeper::HeatKeeper(moe::StreamingExperts& stream, const gguf::GgufModel& file, const EngineConfig& cfg,
                       const DecisionLog& log, std::function<void(std::string_view)> later)
    : stream_(stream), later_(std::move(later)), last_save_(std::chrono::steady_clock::now()) {
  if (cfg.heat == "auto") {
    path_ = default_heat_path(file);
    if (path_.empty()) {
      log("heat profile", "not kept: no cache directory (set HOME or MOETIER_CACHE_DIR, or give --heat FILE)");
    }
  } else if (cfg.heat != "off") {
    path_ = cfg.heat;
  }

  // The kept profile: this run's counts go on from it (whichever profile the warm start reads), and --cache-warm
  // auto reads it. Anything but a regular file or nothing at its path is not ours to read or replace.
  std::optional<moe::HeatProfile> kept;
  std::string kept_note;  // why there is none to use
  if (!path_.empty()) {
    std::error_code ec;
    const auto type = std::filesystem::status(path_, ec).type();
    if (type == std::filesystem::file_type::not_found) {
      kept_note = fmt::format("no heat profile at {} yet (this run writes one when it decodes)", path_.string());
    } else if (type != std::filesystem::file_type::regular) {
      if (cfg.heat != "auto") fail("--heat {}: is not a regular file", cfg.heat);
      kept_note = fmt::format("{} is not a regular file, so no heat profile is kept", path_.string());
      path_.clear();
    } else {
      try {
        moe::HeatProfile p = moe::HeatProfile::load(path_);
        if (const std::string why = p.mismatch(stream.heat().model()); !why.empty()) {
          kept_note = fmt::format("{} does not fit: {} (this run replaces it)", path_.string(), why);
        } else {
          kept = std::move(p);
        }
      } catch (const std::exception& e) {
        kept_note = fmt::format("{} (this run replaces it)", e.what());
      }
    }
  }
  if (!path_.empty()) {
    log("heat profile", fmt::format("{} (decode routing counts{}, written at the end of a run that decodes and every "
                                    "{:.0f} min of a longer one)",
                                    path_.string(),
                                    kept ? fmt::format(" of {} decode tokens so far", kept->decode_tokens()) : "",
                                    kSaveEverySeconds / 60.0));
  }
  if (kept) stream_.seed_heat(*kept);
  saved_tokens_ = stream_.heat().decode_tokens();

  // The profile the warm start reads: the kept one (auto), a given file, or none.
  const bool records_trace = !cfg.telemetry.route_trace.empty();
  std::optional<moe::HeatProfile> given;
  const moe::HeatProfile* profile = nullptr;
  std::filesystem::path from;
  if (cfg.cache_warm == "off") {
    log("cache warm", "off (a cold start)");
    return;
  }
  if (cfg.cache_warm == "auto") {
    warm_summary_ = "none";
    if (records_trace) {
      log("cache warm", "none: --route-trace records a cold start, which `moetier replay` reproduces row by row "
                        "(--cache-warm FILE warms anyway)");
      return;
    }
    if (!kept) {
      log("cache warm", fmt::format("none: {}", path_.empty() ? std::string("no heat profile is kept") : kept_note));
      return;
    }
    profile = &*kept;
    from = path_;
  } else {
    from = cfg.cache_warm;
    given = moe::HeatProfile::load(from);
    if (const std::string why = given->mismatch(stream.heat().model()); !why.empty()) {
      fail("--cache-warm {}: {}", cfg.cache_warm, why);
    }
    profile = &*given;
    if (records_trace) {
      log("note", "the route trace does not record the warm start: `moetier replay` of it starts cold, so its "
                  "residency column will not match row by row");
    }
  }

  const std::vector<moe::ExpertKey> hot = profile->hottest();
  const moe::StreamingExperts::WarmStart w = stream_.warm(hot);
  warm_summary_ = fmt::format("{} experts, {:.1f} MiB read in {:.2f} s", w.experts,
                              static_cast<double>(w.bytes) / kMiB, w.seconds);
  if (w.experts == 0) {
    log("cache warm", fmt::format("none: {} {}", from.string(),
                                  hot.empty() ? "counts no decode routing yet" : "but the store has no cache"));
    return;
  }
  const double mib = static_cast<double>(w.bytes) / kMiB;
  const double read_s = w.seconds - w.pack_seconds;
  log("cache warm", fmt::format("{} of the {} experts the profile {} ({} decode tokens) counts, {:.1f} MiB read "
                                "in file order in {:.2f} s ({:.0f} MiB/s){}",
                                w.experts, hot.size(), from.string(), profile->decode_tokens(), mib, read_s,
                                read_s > 0 ? mib / read_s : 0.0,
                                w.packed > 0 ? fmt::format(", repacked in their slots in {:.2f} s", w.pack_seconds)
                                             : std::string()));
}

void HeatKeeper::maybe_save() {
  if (path_.empty() || failed_) return;
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_save_).count();
  if (since >= kSaveEverySeconds) save();
}

void HeatKeeper::save() {
  if (path_.empty() || failed_ || stream_.heat().decode_tokens() == saved_tokens_) return;
  try {
    std::error_code ec;
    if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
    stream_.heat().save(path_);
    saved_tokens_ = stream_.heat().decode_tokens();
    last_save_ = std::chrono::steady_clock::now();
  } catch (const std::exception& e) {
    failed_ = true;
    if (later_) later_(fmt::format("heat profile: not saved: {}", e.what()));
  }
}

}  // namespace moetier::engine
