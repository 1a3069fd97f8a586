// Reading an architecture's hyperparameters from GGUF metadata: keys are "<arch>.<suffix>" (e.g.
// "qwen3moe.block_count"). Every getter names the full key in its error, and the range checks say what was
// expected, so bad metadata fails at load with a name rather than later with a wrong number.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gguf/gguf.h"

namespace moetier::model {

class ArchMetadata {
 public:
  ArchMetadata(const gguf::Metadata& md, std::string arch) : md_(md), arch_(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }
  bool has(std::string_view suffix) const { return md_.has(key(suffix)); }

  // A required positive integer (> 0), or one at least `min`.
  int64_t count(std::string_view suffix, int64_t min = 1) const;
  int64_t count_or(std::string_view suffix, int64_t fallback, int64_t min = 1) const;
  // A required float that must be finite and > 0.
  float positive_float(std::string_view suffix) const;
  float positive_float_or(std::string_view suffix, float fallback) const;
  std::string string_or(std::string_view suffix, std::string fallback) const;
  bool bool_or(std::string_view suffix, bool fallback) const;

  // Fails naming the key unless `ok`; `expected` describes the rule, e.g. "a multiple of head_count".
  void require(bool ok, std::string_view suffix, int64_t found, std::string_view expected) const;

 private:
  const gguf::Metadata& md_;
  std::string arch_;
};

// Fails naming metadata key `suffix` (= `value`) unless tensor `name` exists in `file` with GGUF shape `want`
// (ne[0] first); `want_text` says what the shape should be, e.g. "[256, 16] (n_embd, expert_count)". For checking
// a hyperparameter against the tensor it sizes, before any buffer is sized by it.
void check_shape(const gguf::GgufModel& file, const ArchMetadata& md, std::string_view suffix, int64_t value,
                 const std::string& name, std::initializer_list<int64_t> want, std::string_view want_text);

}  // namespace moetier::model
