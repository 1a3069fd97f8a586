#include "cli/interrupt.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "util/error.h"

namespace moetier::cli {
namespace {

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler may only touch a lock-free atomic");

std::atomic<int> g_stop{0};
// The self-pipe: the handler writes a byte to [1], LineReader polls [0]. Both ends non-blocking, so the handler
// never blocks on a full pipe (a byte already waiting is wake-up enough).
int g_wake[2] = {-1, -1};
struct sigaction g_old_int {}, g_old_term {};

void on_stop_signal(int sig) {
  const int saved_errno = errno;  // write() below may change it under the interrupted code
  int expected = 0;
  if (!g_stop.compare_exchange_strong(expected, sig)) {
    // A second stop signal while the first is not yet acted on: end now, as if there were no handler.
    std::signal(sig, SIG_DFL);
    std::raise(sig);  // delivered when the handler returns (the signal is blocked while it runs)
  }
  if (g_wake[1] >= 0) {
    const char b = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_wake[1], &b, 1);
  }
  errno = saved_errno;
}

void drain_wake_pipe() {
  char buf[64];
  while (::read(g_wake[0], buf, sizeof(buf)) > 0) {
  }
}

}  // namespace

const std::atomic<int>& stop_flag() { return g_stop; }

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

void clear_stop() { g_stop.store(0); }

void end_if_stopped() {
  const int sig = g_stop.load();
  if (sig == 0) return;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
  std::_Exit(128 + sig);  // only if the signal is blocked or ignored by the caller's mask
}

StopSignals::StopSignals() {
  if (g_wake[0] < 0 && ::pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0)
    fail("cannot create the pipe for Ctrl-C handling: {}", std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

LineReader::Result LineReader::next(std::string& line) {
  while (true) {
    if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
      line.assign(buf_, 0, nl);
      buf_.erase(0, nl + 1);
      return Result::line;
    }
    if (eof_) {
      if (buf_.empty()) return Result::end;
      line = std::move(buf_);
      buf_.clear();
      return Result::line;
    }
    if (stop_signal() != 0) return Result::stopped;
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    const nfds_t n_fds = g_wake[0] >= 0 ? 2 : 1;
    if (::poll(fds, n_fds, -1) < 0) {
      if (errno == EINTR) continue;
      fail("reading standard input failed: {}", std::strerror(errno));
    }
    if (n_fds == 2 && (fds[1].revents & POLLIN) != 0) drain_wake_pipe();
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) == 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(STDIN_FILENO, chunk, sizeof(chunk));
    if (got > 0) {
      buf_.append(chunk, static_cast<size_t>(got));
    } else if (got == 0) {
      eof_ = true;
    } else if (errno != EINTR && errno != EAGAIN) {
      fail("reading standard input failed: {}", std::strerror(errno));
    }
  }
}

}  // namespace moetier::cli
