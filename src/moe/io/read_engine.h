// Parallel file reads for expert streaming: N "lanes" that each have one read in flight.
//
// Two implementations behind one interface: a pool of threads calling pread (one thread per lane) and an
// io_uring ring (liburing) of depth N driven from the calling thread. Both take page-aligned windows from
// ModelFiles (so direct I/O works), retry short reads, and report each read's result and its time in flight.
// Which is faster is measured by tests/stream/read_bench_test.cpp (see kDefaultEngine for the figures).
//
// Thread-safety: submit() and wait() are called from one thread (the compute thread that owns the engine); the
// pread pool's lanes are internal. Nothing is allocated after construction: queues are fixed rings of
// `capacity` entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "moe/io/model_files.h"

namespace moetier::moe::io {

struct ReadOp {
  uint32_t file = 0;    // index into ModelFiles
  uint64_t offset = 0;  // bytes; kPage-aligned when the files are direct
  uint64_t length = 0;  // bytes; kPage-aligned when the files are direct, unless the window ends at the file's end
  uint8_t* dst = nullptr;  // kPage-aligned when the files are direct; must stay valid until wait() returns the op
  uint64_t tag = 0;     // returned unchanged in ReadDone
};

struct ReadDone {
  uint64_t tag = 0;
  int64_t result = 0;  // bytes read (fewer than length only at end of file), or -errno
  double ms = 0.0;     // time from the read's start on its lane to its completion, milliseconds
};

enum class EngineKind { pread_pool, uring };
std::string_view engine_name(EngineKind k);  // "pread", "io_uring"
// "pread" / "io_uring"; throws moetier::Error naming the flag value otherwise.
EngineKind parse_engine(std::string_view s);

// The default, measured with tests/stream/read_bench_test.cpp (DISABLED_PreadPoolVersusIoUring: page cache
// dropped, random direct reads of a 2 GiB file on ext4 over virtio, 2 vCPUs; two runs, MiB/s):
//   1 MiB reads, lanes 1/2/4/8:  pread 211-311 / 343-523 / 395-551 / 495-513   io_uring 187-284 / 254-391 / 368-378 / 366-385
//   4 MiB reads, lanes 1/2/4/8:  pread 411-777 / 444-882 / 393-844 / 468-880   io_uring 342-349 / 362-401 / 343-389 / 390-420
// The pread pool was faster in every configuration there, so it is the default; io_uring stays selectable
// (engine = io_uring) for machines where the ring wins (fast NVMe, many lanes).
inline constexpr EngineKind kDefaultEngine = EngineKind::pread_pool;

struct EngineOptions {
  EngineKind kind = kDefaultEngine;
  int lanes = 4;  // reads in flight at once, >= 1
  // Test hook: the read with this 0-based submission number completes with -EIO instead of reading. -1 = off.
  int64_t fail_read = -1;
};

class ReadEngine {
 public:
  virtual ~ReadEngine() = default;
  // Queues a read; starts it at once when a lane is free. Never blocks on I/O. At most `capacity` reads may be
  // outstanding (submitted and not yet returned by wait()).
  virtual void submit(const ReadOp& op) = 0;
  // Blocks until some outstanding read completes and returns it. Requires outstanding() > 0.
  virtual ReadDone wait() = 0;
  // Non-blocking wait(): when some outstanding read has completed, stores it in `done` and returns true;
  // otherwise returns false at once. Lets the streaming store collect background reads between fetches.
  virtual bool try_wait(ReadDone& done) = 0;
  virtual size_t outstanding() const = 0;
  virtual EngineKind kind() const = 0;
  virtual int lanes() const = 0;
};

// `files` must outlive the engine. When io_uring is requested but the kernel refuses a ring (old kernel, seccomp),
// returns the pread pool and sets *note to the reason (otherwise *note is cleared). Throws moetier::Error for
// lanes < 1 or when threads cannot be started.
std::unique_ptr<ReadEngine> make_read_engine(const ModelFiles& files, const EngineOptions& opts, size_t capacity,
                                             std::string* note = nullptr);

}  // namespace moetier::moe::io
