// make_policy: the online policies by name.
#include <array>
#include <string>

#include "moe/cache_policy.h"
#include "moe/policies/adaptive.h"
#include "moe/policies/lfu.h"
#include "moe/policies/lfu_decay.h"
#include "moe/policies/lru.h"
#include "moe/policies/reuse.h"
#include "moe/policies/static_hot.h"
#include "util/error.h"

namespace moetier::moe {

namespace {
constexpr std::array<std::string_view, 7> kNames = {"lru",    "lfu",      "lfu-decay", "adaptive",
                                                    "adaptive-tuned", "static", "reuse"};
}  // namespace

std::span<const std::string_view> policy_names() { return kNames; }

std::unique_ptr<CachePolicy> make_policy(std::string_view name, CacheConfig config) {
  if (name == "lru") return std::make_unique<LruPolicy>(std::move(config));
  if (name == "lfu") return std::make_unique<LfuPolicy>(std::move(config));
  if (name == "lfu-decay") return std::make_unique<LfuDecayPolicy>(std::move(config));
  if (name == "adaptive") return std::make_unique<AdaptivePolicy>(std::move(config), "adaptive");
  if (name == "adaptive-tuned") {
    const PolicyParams tuned = PolicyParams::adaptive_tuned();
    config.params.adapt_every = tuned.adapt_every;
    config.params.adapt_swaps = tuned.adapt_swaps;
    config.params.adapt_decay = tuned.adapt_decay;
    return std::make_unique<AdaptivePolicy>(std::move(config), "adaptive-tuned");
  }
  if (name == "static") return std::make_unique<StaticPolicy>(std::move(config));
  if (name == "reuse") return std::make_unique<ReusePolicy>(std::move(config));
  std::string valid;
  for (std::string_view n : kNames) valid += (valid.empty() ? "" : ", ") + std::string(n);
  fail("unknown cache policy '{}' (expected one of: {})", name, valid);
}

}  // namespace moetier::moe
