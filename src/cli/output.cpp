#include "cli/output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "util/error.h"

namespace moetier::cli {
namespace {

int g_write_errno = 0;  // errno of the first failed write through write_stdout(), 0 when none failed

}  // namespace

bool write_stdout(std::string_view s) {
  errno = 0;
  const bool ok = std::fwrite(s.data(), 1, s.size(), stdout) == s.size() && std::fflush(stdout) == 0;
  if (!ok && g_write_errno == 0) g_write_errno = errno;
  return ok;
}

void check_stdout(int write_errno) {
  if (g_write_errno == 0 && std::cout.bad()) g_write_errno = write_errno;
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int flush_errno = errno;
  if (flushed && std::ferror(stdout) == 0 && !std::cout.bad()) return;
  const int e = g_write_errno != 0 ? g_write_errno : flush_errno;
  if (e == 0) fail("writing standard output failed");  // an earlier write failed where its errno was not kept
  fail("writing standard output failed: {}", std::strerror(e));
}

}  // namespace moetier::cli
