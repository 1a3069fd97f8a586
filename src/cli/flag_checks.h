// Checks of numeric flag values, shared by every subcommand: a value is parsed, never wrapped or saturated.
//
// CLI11 (2.1) converts integers with strtoll/strtoull in base 0, so on its own an unsigned option takes "-5" as
// 2^64 - 5, "010" is 8, "0x10" is 16 and "99999999999999999999" saturates; floats take "nan" and "inf". These
// validators see the flag's text first: integers must be plain decimal ('-' and digits) and in range, and are
// handed on in canonical form; floats must be finite decimal numbers in range. A failure is CLI11's
// ValidationError, printed as "--flag: VALUE is not PHRASE" (e.g. "--ctx-size: -5 is not a whole number ≥ 0")
// with a non-zero exit status.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace moetier::cli {

// `text` as a plain decimal integer of type T in [lo, hi]; nullopt when it is anything else (a sign on an unsigned
// type, '+', spaces, a base prefix, a fraction or exponent, a value past T or outside the range).
template <class T>
std::optional<T> parse_whole(std::string_view text, T lo, T hi);

// "a whole number ≥ 1", "a whole number from 1 to 64": the range as a person writes it.
template <class T>
std::string whole_phrase(T lo, T hi);

// An integer flag of type T (the option's own type: T's limits are the default range). `phrase` replaces the
// range's wording where a value has a meaning of its own ("-1 (until the end) or a whole number ≥ 0").
template <class T>
CLI::Validator whole(T lo, T hi = std::numeric_limits<T>::max(), std::string phrase = "");

// As whole(), or exactly `word` (e.g. "auto"), which is passed on as given.
template <class T>
CLI::Validator word_or_whole(std::string word, T lo, T hi = std::numeric_limits<T>::max());

// A word flag: exactly one of `names`, else "--flag: VALUE is not one of a, b, c".
CLI::Validator one_of(std::vector<std::string> names);

// Which ends of a float range are included.
enum class Ends { closed, open_low, open_high, open };

// A float flag of type T (float or double): a finite decimal number in [lo, hi] (ends as `ends` says; "(0, 1]"
// is Ends::open_low), finite as T too. hi = T's max means no upper bound ("a number ≥ 0").
template <class T>
CLI::Validator real(T lo, T hi = std::numeric_limits<T>::max(), Ends ends = Ends::closed);

}  // namespace moetier::cli
