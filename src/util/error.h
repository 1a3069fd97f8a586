// The one exception type of moetier. Library code throws it at the edges where input enters (file parsing,
// metadata validation, flag values, I/O); the CLI catches it, prints what() and exits non-zero. Messages name
// the file, tensor, key or flag concerned and what was expected, so the user can act on them.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace moetier {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace moetier
