#include "model/arch_metadata.h"

#include <cmath>

#include "util/error.h"

namespace moetier::model {

int64_t ArchMetadata::count(std::string_view suffix, int64_t min) const {
  const std::string k = key(suffix);
  const int64_t v = md_.get_int(k);
  if (v < min) fail("metadata key '{}' is {}, expected at least {}", k, v, min);
  return v;
}

int64_t ArchMetadata::count_or(std::string_view suffix, int64_t fallback, int64_t min) const {
  return has(suffix) ? count(suffix, min) : fallback;
}

float ArchMetadata::positive_float(std::string_view suffix) const {
  const std::string k = key(suffix);
  const double v = md_.get_float(k);
  if (!std::isfinite(v) || v <= 0.0) fail("metadata key '{}' is {}, expected a finite value > 0", k, v);
  return static_cast<float>(v);
}

float ArchMetadata::positive_float_or(std::string_view suffix, float fallback) const {
  return has(suffix) ? positive_float(suffix) : fallback;
}

std::string ArchMetadata::string_or(std::string_view suffix, std::string fallback) const {
  return md_.get_string_or(key(suffix), std::move(fallback));
}

bool ArchMetadata::bool_or(std::string_view suffix, bool fallback) const {
  return has(suffix) ? md_.get_bool(key(suffix)) : fallback;
}

void check_shape(const gguf::GgufModel& file, const ArchMetadata& md, std::string_view suffix, int64_t value,
                 const std::string& name, std::initializer_list<int64_t> want, std::string_view want_text) {
  const gguf::TensorInfo* t = file.find(name);
  if (t == nullptr) fail("tensor '{}' is missing from {}", name, file.path().string());
  bool ok = t->n_dims == want.size();
  size_t d = 0;
  for (const int64_t x : want) ok = ok && t->ne[d++] == x;
  if (!ok) {
    fail("metadata key '{}' is {}, but tensor '{}' has shape {}, expected {}", md.key(suffix), value, name,
         t->shape_string(), want_text);
  }
}

void ArchMetadata::require(bool ok, std::string_view suffix, int64_t found, std::string_view expected) const {
  if (!ok) fail("metadata key '{}' is {}, expected {}", key(suffix), found, expected);
}

}  // namespace moetier::model
