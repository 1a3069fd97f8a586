#include "moe/heat_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/text_file.h"

namespace moetier::moe {
namespace {

constexpr const char* kFormat = "moetier heat profile";
constexpr int kVersion = 1;
constexpr int32_t kMaxDim = 1 << 16;        // layers or experts: far above any model
constexpr int64_t kMaxEntries = 1 << 20;    // layers x experts (8 MiB of counts): DeepSeek-V3 has 58 x 256
// No count can exceed the sum of the fade's series, 1 / (1 - kDecayPerToken) = 200 (a little more for rounding).
constexpr double kMaxCount = 1.0 / (1.0 - HeatProfile::kDecayPerToken) + 1.0;

}  // namespace

HeatProfile::HeatProfile(HeatModel model) : model_(std::move(model)) {
  if (model_.n_moe_layers <= 0 || model_.n_expert <= 0 || model_.n_moe_layers > kMaxDim ||
      model_.n_expert > kMaxDim ||
      int64_t{model_.n_moe_layers} * int64_t{model_.n_expert} > kMaxEntries) {
    fail("heat profile: {} MoE layers x {} experts is not a model shape (each in 1..{}, at most {} in all)",
         model_.n_moe_layers, model_.n_expert, kMaxDim, kMaxEntries);
  }
  counts_.assign(static_cast<size_t>(model_.n_moe_layers) * static_cast<size_t>(model_.n_expert), 0.0);
}

void HeatProfile::record(int32_t layer, std::span<const int32_t> experts) {
  for (const int32_t e : experts) counts_[index({layer, e})] += 1.0;
}

void HeatProfile::end_decode_step() {
  for (double& c : counts_) c *= kDecayPerToken;
  ++decode_tokens_;
}

std::string HeatProfile::mismatch(const HeatModel& m) const {
  if (m.arch != model_.arch || m.n_moe_layers != model_.n_moe_layers || m.n_expert != model_.n_expert) {
    return fmt::format("it was counted on {} ({}, {} MoE layers x {} experts), not on a model like this one ({}, {} "
                       "MoE layers x {} experts)",
                       model_.model.empty() ? std::string("a model") : model_.model, model_.arch, model_.n_moe_layers,
                       model_.n_expert, m.arch, m.n_moe_layers, m.n_expert);
  }
  return "";
}

void HeatProfile::seed(const HeatProfile& older) {
  if (const std::string why = older.mismatch(model_); !why.empty()) fail("heat profile: {}", why);
  counts_ = older.counts_;
  decode_tokens_ = older.decode_tokens_;
}

std::vector<ExpertKey> HeatProfile::hottest() const {
  std::vector<uint32_t> order;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] > 0.0) order.push_back(static_cast<uint32_t>(i));
  }
  // Stable: equal counts keep (layer, expert) order.
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return counts_[a] > counts_[b]; });
  std::vector<ExpertKey> keys;
  keys.reserve(order.size());
  const auto E = static_cast<uint32_t>(model_.n_expert);
  for (const uint32_t i : order) keys.push_back({static_cast<int32_t>(i / E), static_cast<int32_t>(i % E)});
  return keys;
}

void HeatProfile::save(const std::filesystem::path& path) const {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["model"] = model_.model;
  j["arch"] = model_.arch;
  j["file_bytes"] = model_.file_bytes;
  j["n_moe_layers"] = model_.n_moe_layers;
  j["n_expert"] = model_.n_expert;
  j["decay_per_token"] = kDecayPerToken;
  j["decode_tokens"] = decode_tokens_;
  nlohmann::json heat = nlohmann::json::array();
  const auto E = static_cast<size_t>(model_.n_expert);
  for (size_t l = 0; l < static_cast<size_t>(model_.n_moe_layers); ++l) {
    nlohmann::json row = nlohmann::json::array();
    // Counts are at most 1 / (1 - kDecayPerToken) = 200: four decimals rank experts, and keep a 48 x 128 profile
    // near 60 KB.
    for (size_t e = 0; e < E; ++e) row.push_back(std::round(counts_[l * E + e] * 1e4) / 1e4);
    heat.push_back(std::move(row));
  }
  j["heat"] = std::move(heat);
  const std::string text = j.dump() + "\n";

  // A unique temporary file beside the target (the rename stays within one file system), written and synced
  // whole, then renamed over the target: a reader sees the old profile or the new one, never a part. Two runs
  // saving at once each write a whole profile; the last rename wins.
  const std::string p = path.string();
  std::string tmp = p + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail("heat profile {}: cannot create a file beside it: {}", p, std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const int err = done < text.size() || ::fsync(fd) != 0 ? errno : 0;
  ::close(fd);
  if (err != 0 || done < text.size()) {
    ::unlink(tmp.c_str());
    fail("heat profile {}: cannot write: {}", p, std::strerror(err != 0 ? err : EIO));
  }
  if (::rename(tmp.c_str(), p.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    fail("heat profile {}: cannot replace: {}", p, std::strerror(e));
  }
}

HeatProfile HeatProfile::load(const std::filesystem::path& path) {
  const std::string p = path.string();
  const std::string text = util::read_text_file(path, "heat profile", size_t{64} << 20);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("heat profile {}: not a JSON object", p);
  if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != kFormat) {
    fail("heat profile {}: \"format\" is not \"{}\"", p, kFormat);
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kVersion) {
    fail("heat profile {}: version is not {} (written by another moetier?)", p, kVersion);
  }
  const auto need_int = [&](const char* key, int64_t lo, int64_t hi) {
    if (!j.contains(key) || !j[key].is_number_integer() ||
        (j[key].is_number_unsigned() && j[key].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      fail("heat profile {}: \"{}\" is missing or not an integer in {}..{}", p, key, lo, hi);
    }
    const auto v = j[key].get<int64_t>();
    if (v < lo || v > hi) fail("heat profile {}: \"{}\" {} is outside {}..{}", p, key, v, lo, hi);
    return v;
  };
  const auto need_string = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) fail("heat profile {}: \"{}\" is missing or not a string", p, key);
    return j[key].get<std::string>();
  };
  HeatModel m;
  m.model = need_string("model");
  m.arch = need_string("arch");
  if (!j.contains("file_bytes") || !j["file_bytes"].is_number_unsigned()) {
    fail("heat profile {}: \"file_bytes\" is missing or not a non-negative integer", p);
  }
  m.file_bytes = j["file_bytes"].get<uint64_t>();
  m.n_moe_layers = static_cast<int32_t>(need_int("n_moe_layers", 1, kMaxDim));
  m.n_expert = static_cast<int32_t>(need_int("n_expert", 1, kMaxDim));
  // The shape of the counts first: the stated one is only allocated once the file holds it.
  const auto& heat = j.contains("heat") ? j["heat"] : nlohmann::json();
  if (!heat.is_array() || heat.size() != static_cast<size_t>(m.n_moe_layers)) {
    fail("heat profile {}: \"heat\" must be an array of {} rows (one per MoE layer)", p, m.n_moe_layers);
  }
  const auto E = static_cast<size_t>(m.n_expert);
  for (size_t l = 0; l < heat.size(); ++l) {
    if (!heat[l].is_array() || heat[l].size() != E) {
      fail("heat profile {}: row {} of \"heat\" must hold {} counts", p, l, E);
    }
  }
  HeatProfile h(m);
  h.decode_tokens_ = need_int("decode_tokens", 0, INT64_MAX);
  for (size_t l = 0; l < heat.size(); ++l) {
    for (size_t e = 0; e < E; ++e) {
      const auto& c = heat[l][e];
      if (!c.is_number()) fail("heat profile {}: heat[{}][{}] is not a number", p, l, e);
      const double v = c.get<double>();
      if (!std::isfinite(v) || v < 0.0 || v > kMaxCount) {
        fail("heat profile {}: heat[{}][{}] = {} is not a count in 0..{:.0f}", p, l, e, v, kMaxCount);
      }
      h.counts_[l * E + e] = v;
    }
  }
  return h;
}

}  // namespace moetier::moe
