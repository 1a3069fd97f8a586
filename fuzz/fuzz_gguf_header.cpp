// libFuzzer entry: any byte string given to parse_header either parses or throws moetier::Error. Anything else
// (a crash, a sanitizer report, another exception type, a hang, an allocation beyond -rss_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"
#include "util/error.h"

namespace {
// Keeps the display walk below from being optimised away.
volatile size_t g_sink = 0;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto h = moetier::gguf::parse_header({data, size}, size, "fuzz-input");
    // Walk what was parsed the way `inspect` does, so display code sees hostile values too.
    size_t chars = 0;
    for (const auto& [key, value] : h.metadata.entries()) chars += key.size() + value.to_display().size();
    for (const auto& t : h.tensors) chars += t.shape_string().size() + static_cast<size_t>(t.n_elements() > 0);
    g_sink = chars;
  } catch (const moetier::Error&) {
  }
  return 0;
}
