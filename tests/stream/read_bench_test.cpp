// pread pool vs io_uring, measured (disabled by default: it writes a 2 GiB file and takes ~a minute):
//   build-stream/tests/test_stream --gtest_also_run_disabled_tests --gtest_filter='*ReadBench*'
// Random page-aligned direct reads of 1 and 4 MiB (the size of one expert slice of a large model) over a 2 GiB
// file, page cache dropped before each configuration when running as root; MiB/s for 1, 2, 4 and 8 lanes.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "moe/io/anon_buffer.h"
#include "moe/io/model_files.h"
#include "moe/io/read_engine.h"
#include "test_support.h"

namespace moetier::moe::io {
namespace {

namespace fs = std::filesystem;

fs::path big_file(uint64_t bytes) {
  const fs::path p = moetier::test::tmp_dir("stream_bench") / "big.bin";
  if (fs::exists(p) && fs::file_size(p) == bytes) return p;
  std::ofstream out(p, std::ios::binary);
  std::vector<uint64_t> chunk((4u << 20) / 8);
  std::mt19937_64 rng(1);
  for (uint64_t done = 0; done < bytes; done += 4u << 20) {
    for (auto& x : chunk) x = rng();
    out.write(reinterpret_cast<const char*>(chunk.data()), 4 << 20);
  }
  return p;
}

bool drop_caches() {
  sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "3";
  return static_cast<bool>(f);
}

TEST(ReadBench, DISABLED_PreadPoolVersusIoUring) {
  constexpr uint64_t kFile = uint64_t{2} << 30, kTotal = uint64_t{512} << 20;  // bytes
  const fs::path p = big_file(kFile);
  const ModelFiles files({p}, FileOptions{});
  fmt::print("  {} ({})\n", p.string(), files.direct_note());
  for (const uint64_t size : {uint64_t{1} << 20, uint64_t{4} << 20}) {
    for (const int lanes : {1, 2, 4, 8}) {
      for (const auto kind : {EngineKind::pread_pool, EngineKind::uring}) {
        const bool cold = drop_caches();
        const size_t n_ops = kTotal / size;
        auto eng = make_read_engine(files, EngineOptions{kind, lanes, -1}, n_ops);
        AnonBuffer buf(size * static_cast<uint64_t>(lanes) * 2, "bench");
        std::mt19937_64 rng(size + static_cast<uint64_t>(lanes));
        const auto t0 = std::chrono::steady_clock::now();
        size_t submitted = 0, done = 0;
        // Keep 2 x lanes reads queued so every lane always has work; buffers are reused round-robin.
        while (done < n_ops) {
          while (submitted < n_ops && eng->outstanding() < static_cast<size_t>(2 * lanes)) {
            const uint64_t off = round_down(rng() % (kFile - size), kPage);
            eng->submit(ReadOp{0, off, size, buf.data() + (submitted % (2 * static_cast<size_t>(lanes))) * size, submitted});
            ++submitted;
          }
          const ReadDone d = eng->wait();
          ASSERT_EQ(d.result, static_cast<int64_t>(size));
          ++done;
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        fmt::print("  {:>4} KiB x {} lanes {:<8} {:>7.0f} MiB/s  ({})\n", size >> 10, lanes, engine_name(kind),
                   static_cast<double>(kTotal) / (1 << 20) / s, cold ? "cold" : "page cache not dropped");
      }
    }
  }
}

}  // namespace
}  // namespace moetier::moe::io
