#include "moe/heat_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/text_file.h"

namespace moetier::moe {
namespace {

constexpr const char* kFormat = "moetier heat profile";
constexpr int kVersion = 1;
constexpr int32_t kMaxDim = 1 << 16;  // layers or experts: far above any model, and the product fits in memory

}  // namespace

HeatProfile::HeatProfile(HeatModel model) : model_(std::move(model)) {
  if (model_.n_moe_layers <= 0 || model_.n_expert <= 0 || model_.n_moe_layers > kMaxDim ||
      model_.n_expert > kMaxDim) {
    fail("heat profile: {} MoE layers x {} experts is not a model shape (each in 1..{})", model_.n_moe_layers,
         model_.n_expert, kMaxDim);
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

  // Beside the target, so the rename stays within one file system; the pid keeps two runs from sharing it.
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp{}", ::getpid());
  {
    const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
    if (!f) fail("heat profile {}: cannot create: {}", tmp.string(), std::strerror(errno));
    if (std::fwrite(text.data(), 1, text.size(), f.get()) != text.size() || std::fflush(f.get()) != 0) {
      const int err = errno;
      std::filesystem::remove(tmp);
      fail("heat profile {}: cannot write: {}", tmp.string(), std::strerror(err));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    fail("heat profile {}: cannot replace: {}", path.string(), ec.message());
  }
}

HeatProfile HeatProfile::load(const std::filesystem::path& path) {
  const std::string p = path.string();
  const std::string text = util::read_text_file(path, "heat profile", size_t{64} << 20);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("heat profile {}: not a JSON object", p);
  if (j.value("format", std::string()) != kFormat) fail("heat profile {}: format is not \"{}\"", p, kFormat);
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kVersion) {
    fail("heat profile {}: version is not {} (written by another moetier?)", p, kVersion);
  }
  const auto need_int = [&](const char* key, int64_t lo, int64_t hi) {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      fail("heat profile {}: \"{}\" is missing or not an integer", p, key);
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
  HeatProfile h(m);
  h.decode_tokens_ = need_int("decode_tokens", 0, INT64_MAX);
  const auto& heat = j.contains("heat") ? j["heat"] : nlohmann::json();
  if (!heat.is_array() || heat.size() != static_cast<size_t>(m.n_moe_layers)) {
    fail("heat profile {}: \"heat\" must be an array of {} rows (one per MoE layer)", p, m.n_moe_layers);
  }
  const auto E = static_cast<size_t>(m.n_expert);
  for (size_t l = 0; l < heat.size(); ++l) {
    const auto& row = heat[l];
    if (!row.is_array() || row.size() != E) fail("heat profile {}: row {} of \"heat\" must hold {} counts", p, l, E);
    for (size_t e = 0; e < E; ++e) {
      if (!row[e].is_number()) fail("heat profile {}: heat[{}][{}] is not a number", p, l, e);
      const double c = row[e].get<double>();
      if (!std::isfinite(c) || c < 0.0) fail("heat profile {}: heat[{}][{}] = {} is not a count >= 0", p, l, e, c);
      h.counts_[l * E + e] = c;
    }
  }
  return h;
}

}  // namespace moetier::moe
