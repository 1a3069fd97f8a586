#include "moe/io/read_engine.h"

#include "moe/io/pread_pool.h"
#include "moe/io/uring_reader.h"
#include "util/error.h"

namespace moetier::moe::io {

std::string_view engine_name(EngineKind k) { return k == EngineKind::uring ? "io_uring" : "pread"; }

EngineKind parse_engine(std::string_view s) {
  if (s == "pread") return EngineKind::pread_pool;
  if (s == "io_uring" || s == "uring") return EngineKind::uring;
  fail("unknown read engine '{}' (expected pread or io_uring)", s);
}

std::unique_ptr<ReadEngine> make_read_engine(const ModelFiles& files, const EngineOptions& opts, size_t capacity,
                                             std::string* note) {
  if (note != nullptr) note->clear();
  if (capacity == 0) capacity = 1;
  if (opts.kind == EngineKind::uring) {
    try {
      return std::make_unique<UringReader>(files, opts, capacity);
    } catch (const Error& e) {
      if (opts.lanes < 1) throw;
      if (note != nullptr) *note = std::string(e.what()) + "; using the pread pool";
    }
  }
  return std::make_unique<PreadPool>(files, opts, capacity);
}

}  // namespace moetier::moe::io
