// The read layer: both engines, direct and buffered, return the file's bytes for random page-aligned windows;
// short reads at the end of the file, injected failures and truncated files are reported, never hidden.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "moe/io/anon_buffer.h"
#include "moe/io/model_files.h"
#include "moe/io/read_engine.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::moe::io {
namespace {

namespace fs = std::filesystem;

// Scratch directory of the running test: ctest runs tests in parallel processes, so each writes its own files.
fs::path test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string n = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : n) c = (c == '/' ? '_' : c);
  return moetier::test::tmp_dir("stream_io/" + n);
}

// A file of `n` pseudo-random bytes (odd size: the last page is partial).
std::vector<uint8_t> make_file(const fs::path& p, size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(n));
  return v;
}

struct EngineCase {
  EngineKind kind;
  int lanes;
  bool direct;
};

class EngineTest : public ::testing::TestWithParam<EngineCase> {};

TEST_P(EngineTest, RandomWindowsMatchTheFile) {
  const EngineCase c = GetParam();
  const fs::path dir = test_dir();
  const size_t n = (3u << 20) + 1234;
  const auto a = make_file(dir / "a.bin", n, 1), b = make_file(dir / "b.bin", n / 2 + 77, 2);
  const ModelFiles files({dir / "a.bin", dir / "b.bin"}, FileOptions{c.direct, {}});
  EXPECT_EQ(files.direct(), c.direct) << files.direct_note();
  constexpr size_t kOps = 48, kMaxPages = 64;
  std::string note;
  auto eng = make_read_engine(files, EngineOptions{c.kind, c.lanes, -1}, kOps, &note);
  if (c.kind == EngineKind::uring && std::getenv("MOETIER_TEST_NO_IO_URING") != nullptr) {
    // Set where the kernel interface has no io_uring (scripts/test-arm64.sh: qemu-user does not emulate it): the
    // ring is refused, and what is tested is the fallback to the pread pool, with its reason.
    EXPECT_FALSE(note.empty());
    EXPECT_EQ(eng->kind(), EngineKind::pread_pool) << note;
  } else {
    EXPECT_TRUE(note.empty()) << note;
    EXPECT_EQ(eng->kind(), c.kind);
  }
  AnonBuffer buf(kOps * kMaxPages * kPage, "test");
  std::mt19937 rng(7);
  struct Want { uint32_t file; uint64_t off, len; };
  std::vector<Want> wants;
  for (size_t i = 0; i < kOps; ++i) {
    const uint32_t f = static_cast<uint32_t>(rng() % 2);
    const uint64_t size = files.size(f);
    const uint64_t off = round_down(rng() % size, kPage);
    const uint64_t len = (1 + rng() % kMaxPages) * kPage;  // may run past the end: a short read
    wants.push_back({f, off, len});
    eng->submit(ReadOp{f, off, len, buf.data() + i * kMaxPages * kPage, i});
  }
  size_t seen = 0;
  while (eng->outstanding() > 0) {
    const ReadDone d = eng->wait();
    const Want& w = wants[d.tag];
    const auto& src = w.file == 0 ? a : b;
    const uint64_t expect = std::min<uint64_t>(w.len, src.size() - w.off);
    ASSERT_EQ(d.result, static_cast<int64_t>(expect)) << "tag " << d.tag;
    EXPECT_GE(d.ms, 0.0);
    EXPECT_EQ(std::memcmp(buf.data() + d.tag * kMaxPages * kPage, src.data() + w.off, expect), 0) << "tag " << d.tag;
    ++seen;
  }
  EXPECT_EQ(seen, kOps);
}

TEST_P(EngineTest, InjectedFailureIsReported) {
  const EngineCase c = GetParam();
  const fs::path dir = test_dir();
  make_file(dir / "c.bin", 1u << 20, 3);
  const ModelFiles files({dir / "c.bin"}, FileOptions{c.direct, {}});
  auto eng = make_read_engine(files, EngineOptions{c.kind, c.lanes, 2}, 4);
  AnonBuffer buf(4 * kPage, "test");
  for (uint64_t i = 0; i < 4; ++i) eng->submit(ReadOp{0, i * kPage, kPage, buf.data() + i * kPage, i});
  int failed = 0;
  while (eng->outstanding() > 0) {
    const ReadDone d = eng->wait();
    if (d.tag == 2) {
      EXPECT_EQ(d.result, -EIO);
      ++failed;
    } else {
      EXPECT_EQ(d.result, static_cast<int64_t>(kPage));
    }
  }
  EXPECT_EQ(failed, 1);
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineTest,
                         ::testing::Values(EngineCase{EngineKind::pread_pool, 1, true},
                                           EngineCase{EngineKind::pread_pool, 4, true},
                                           EngineCase{EngineKind::pread_pool, 3, false},
                                           EngineCase{EngineKind::uring, 1, true},
                                           EngineCase{EngineKind::uring, 4, true},
                                           EngineCase{EngineKind::uring, 3, false}),
                         [](const ::testing::TestParamInfo<EngineCase>& i) {
                           return std::string(engine_name(i.param.kind) == "pread" ? "pread" : "uring") + "_" +
                                  std::to_string(i.param.lanes) + (i.param.direct ? "_direct" : "_buffered");
                         });

TEST(ModelFiles, TruncationIsNamedWithFileAndOffset) {
  const fs::path dir = test_dir();
  make_file(dir / "t.bin", 1u << 20, 4);
  const ModelFiles files({dir / "t.bin"}, FileOptions{});
  fs::resize_file(dir / "t.bin", 100000);
  AnonBuffer buf(kPage, "test");
  EXPECT_EQ(files.read_window(0, 98304, kPage, buf.data()), 100000u - 98304u);  // short only at the end
  const std::string msg = files.describe_failure(0, 524288, 8192, 0);
  EXPECT_NE(msg.find((dir / "t.bin").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 524288"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated from 1048576 to 100000"), std::string::npos) << msg;
}

TEST(ModelFiles, MissingFileThrowsNamingIt) {
  try {
    ModelFiles f({"/nonexistent/x.gguf"}, FileOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.gguf"), std::string::npos) << e.what();
  }
}

TEST(ModelFiles, NoOdirectOptionIsHonouredAndExplained) {
  const fs::path dir = test_dir();
  make_file(dir / "d.bin", 70000, 5);
  const ModelFiles files({dir / "d.bin"}, FileOptions{false, {}});
  EXPECT_FALSE(files.direct());
  EXPECT_NE(files.direct_note().find("no_odirect"), std::string::npos) << files.direct_note();
}

// /dev/shm is tmpfs, which refuses O_DIRECT on many kernels: the fallback must be logged with its reason and reads
// must still be right. (Where tmpfs accepts O_DIRECT, the probe agrees and direct I/O stays on.)
TEST(ModelFiles, RefusedDirectFallsBackWithReason) {
  const fs::path p = "/dev/shm/moetier_stream_io_test.bin";
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  const auto v = make_file(p, 50000, 6);
  std::string logged;
  const ModelFiles files({p}, FileOptions{true, [&](std::string_view s) { logged = s; }});
  if (!files.direct()) {
    EXPECT_NE(logged.find("buffered pread"), std::string::npos) << logged;
    EXPECT_NE(logged.find(p.string()), std::string::npos) << logged;
  }
  AnonBuffer buf(16 * kPage, "test");
  EXPECT_EQ(files.read_window(0, 0, 16 * kPage, buf.data()), v.size());
  EXPECT_EQ(std::memcmp(buf.data(), v.data(), v.size()), 0);
  fs::remove(p);
}

}  // namespace
}  // namespace moetier::moe::io
