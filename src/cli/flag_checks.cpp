#include "cli/flag_checks.h"

#include <charconv>
#include <cmath>
#include <type_traits>

#include <fmt/format.h>

namespace moetier::cli {

template <class T>
std::optional<T> parse_whole(std::string_view text, T lo, T hi) {
  static_assert(std::is_integral_v<T>);
  // Parsed as the widest integer of T's signedness, so a value past T is out of range rather than unparsed.
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  Wide v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v, 10);
  if (text.empty() || ec != std::errc() || p != end) return std::nullopt;
  if (v < static_cast<Wide>(lo) || v > static_cast<Wide>(hi)) return std::nullopt;
  return static_cast<T>(v);
}

template <class T>
std::string whole_phrase(T lo, T hi) {
  if (hi == std::numeric_limits<T>::max()) return fmt::format("a whole number ≥ {}", lo);
  return fmt::format("a whole number from {} to {}", lo, hi);
}

template <class T>
CLI::Validator whole(T lo, T hi, std::string phrase) {
  if (phrase.empty()) phrase = whole_phrase(lo, hi);
  const std::string desc = hi == std::numeric_limits<T>::max() ? fmt::format("≥ {}", lo) : fmt::format("{}..{}", lo, hi);
  return CLI::Validator(
      [lo, hi, phrase](std::string& s) -> std::string {
        const std::optional<T> v = parse_whole<T>(s, lo, hi);
        if (!v) return fmt::format("{} is not {}", s, phrase);
        s = std::to_string(*v);  // canonical: CLI11 would read a leading 0 as octal
        return {};
      },
      desc);
}

template <class T>
CLI::Validator word_or_whole(std::string word, T lo, T hi) {
  const std::string phrase = fmt::format("{} or {}", word, whole_phrase(lo, hi));
  CLI::Validator number = whole<T>(lo, hi, phrase);
  return CLI::Validator(
      [word, number](std::string& s) -> std::string { return s == word ? std::string() : number(s); },
      fmt::format("{}|{}", word, number.get_description()));
}

CLI::Validator one_of(std::vector<std::string> names) {
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return CLI::Validator(
      [names, list](std::string& s) -> std::string {
        for (const std::string& n : names) {
          if (s == n) return {};
        }
        return fmt::format("{} is not one of {}", s, list);
      },
      "");
}

template <class T>
CLI::Validator real(T lo, T hi, Ends ends) {
  static_assert(std::is_floating_point_v<T>);
  const bool open_lo = ends == Ends::open_low || ends == Ends::open;
  const bool open_hi = ends == Ends::open_high || ends == Ends::open;
  std::string range;
  if (hi == std::numeric_limits<T>::max()) {
    range = fmt::format("{} {}", open_lo ? ">" : "≥", lo);
  } else {
    range = fmt::format("in {}{}, {}{}", open_lo ? "(" : "[", lo, hi, open_hi ? ")" : "]");
  }
  const std::string phrase = "a number " + range;
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0.0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, v);
        // Finite as T too: 1e39 is a finite double but an infinite float.
        const bool ok = !s.empty() && ec == std::errc() && p == end && std::isfinite(v) &&
                        std::isfinite(static_cast<T>(v)) && (open_lo ? v > lo : v >= lo) &&
                        (open_hi ? v < hi : v <= hi);
        return ok ? std::string() : fmt::format("{} is not {}", s, phrase);
      },
      range);
}

template std::optional<int32_t> parse_whole(std::string_view, int32_t, int32_t);
template std::optional<int64_t> parse_whole(std::string_view, int64_t, int64_t);
template std::optional<uint64_t> parse_whole(std::string_view, uint64_t, uint64_t);
template std::string whole_phrase(int32_t, int32_t);
template std::string whole_phrase(int64_t, int64_t);
template std::string whole_phrase(uint64_t, uint64_t);
template CLI::Validator whole(int32_t, int32_t, std::string);
template CLI::Validator whole(int64_t, int64_t, std::string);
template CLI::Validator whole(uint64_t, uint64_t, std::string);
template CLI::Validator word_or_whole(std::string, uint64_t, uint64_t);
template CLI::Validator real(float, float, Ends);
template CLI::Validator real(double, double, Ends);

}  // namespace moetier::cli
