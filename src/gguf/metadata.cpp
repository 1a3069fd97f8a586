// Ordered key/value metadata with typed getters whose errors name the key.
#include "gguf/gguf.h"
#include "util/error.h"

namespace moetier::gguf {

namespace {

// Runs a Value conversion and prefixes its error with the key, so every getter failure names what was asked.
template <class F>
auto with_key(std::string_view key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    fail("metadata key '{}' {}", key, e.what());
  }
}

}  // namespace

const Value* Metadata::find(std::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value& Metadata::get(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) fail("metadata key '{}' is missing", key);
  return *v;
}

uint64_t Metadata::get_uint(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&] { return v.as_uint(); });
}

int64_t Metadata::get_int(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&] { return v.as_int(); });
}

double Metadata::get_float(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&] { return v.as_double(); });
}

bool Metadata::get_bool(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&] { return v.as_bool(); });
}

const std::string& Metadata::get_string(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&]() -> const std::string& { return v.as_string(); });
}

std::vector<std::string> Metadata::get_string_array(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&] {
    std::vector<std::string> out;
    for (const Value& e : v.as_array()) out.push_back(e.as_string());
    return out;
  });
}

std::vector<float> Metadata::get_float_array(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&] {
    std::vector<float> out;
    for (const Value& e : v.as_array()) out.push_back(static_cast<float>(e.as_double()));
    return out;
  });
}

std::vector<int64_t> Metadata::get_int_array(std::string_view key) const {
  const Value& v = get(key);
  return with_key(key, [&] {
    std::vector<int64_t> out;
    for (const Value& e : v.as_array()) out.push_back(e.as_int());
    return out;
  });
}

uint64_t Metadata::get_uint_or(std::string_view key, uint64_t fallback) const {
  return has(key) ? get_uint(key) : fallback;
}

double Metadata::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

std::string Metadata::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : fallback;
}

void Metadata::set(std::string key, Value v) {
  const auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(v);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(v));
}

void Metadata::erase(std::string_view key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
}

}  // namespace moetier::gguf
