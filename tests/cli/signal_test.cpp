// Ctrl-C (SIGINT) and SIGTERM during `run` and `chat`, sent to the real binary while it generates: the run stops
// with its summary and a metrics CSV that says it was interrupted, then ends as the signal would (130 / 143 in a
// shell); a second Ctrl-C ends it at once; in chat a Ctrl-C ends the reply and the chat goes on. Every wait is
// bounded: a process that hangs fails the test and is killed.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.h"

extern char** environ;

namespace moetier {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The moetier binary started with posix_spawn: stdin from a pipe the test writes, stdout and stderr together into
// a pipe the test reads. SIGINT, SIGTERM and SIGPIPE start at their default actions, whatever the test runner's.
class Child {
 public:
  // `out_pipe_bytes` > 0 shrinks the output pipe (to make the child block in a write soon when the test stops
  // reading).
  explicit Child(const std::vector<std::string>& args, int out_pipe_bytes = 0) {
    std::signal(SIGPIPE, SIG_IGN);  // writing to a child that has exited must fail, not kill the test
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    if (out_pipe_bytes > 0) fcntl(out[0], F_SETPIPE_SZ, out_pipe_bytes);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t def, none;
    sigemptyset(&def);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGPIPE);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<std::string> argv_s{test::cli_path()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, &at, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(in[0]);
    close(out[1]);
    in_ = in[1];
    out_ = out[0];
  }
  ~Child() {
    if (pid_ > 0 && !status_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }
  void send(int sig) const { kill(pid_, sig); }
  bool write_line(const std::string& s) const {
    const std::string l = s + "\n";
    return write(in_, l.data(), l.size()) == static_cast<ssize_t>(l.size());
  }
  void close_stdin() {
    close(in_);
    in_ = -1;
  }
  const std::string& output() const { return text_; }
  // Bytes written to the output pipe and not yet read.
  int unread_bytes() const {
    int n = 0;
    return ioctl(out_, FIONREAD, &n) == 0 ? n : -1;
  }

  // Reads until the output holds `needle` at or after `from` (true), or `timeout` passes, or the output ends.
  bool wait_for(std::string_view needle, milliseconds timeout, size_t from = 0) {
    const auto end = Clock::now() + timeout;
    while (text_.find(needle, from) == std::string::npos) {
      if (Clock::now() >= end || !read_some(end)) return text_.find(needle, from) != std::string::npos;
    }
    return true;
  }
  // Reads until the output has grown to `n` bytes (true), or `timeout` passes.
  bool wait_for_size(size_t n, milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (text_.size() < n)
      if (Clock::now() >= end || !read_some(end)) return text_.size() >= n;
    return true;
  }
  // Reads the rest of the output and reaps the process; its wait status, or nothing when it is still running
  // after `timeout` (the destructor then kills it).
  std::optional<int> wait_exit(milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (!status_) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = st;
        break;
      }
      if (Clock::now() >= end) return std::nullopt;
      read_some(std::min(end, Clock::now() + milliseconds(50)));
    }
    while (read_some(Clock::now() + milliseconds(200))) {
    }
    return status_;
  }
  // Whether the process is still running (not reaped, not a zombie), without reading its output.
  bool running() {
    if (status_) return false;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
    return !status_;
  }

 private:
  // Reads what is available, waiting at most until `end`; false at end of output or on timeout.
  bool read_some(Clock::time_point end) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(out_, buf, sizeof(buf));
    if (n <= 0) return false;
    text_.append(buf, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string text_;
  std::optional<int> status_;
};

constexpr milliseconds kStartTimeout{60000};  // loading the tiny model and the first tokens, on a loaded machine
constexpr milliseconds kStopTimeout{20000};   // from a signal to the end of the process

std::string model() { return (test::oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf").string(); }
std::string tmp(const std::string& name) { return (test::tmp_dir("signal") / name).string(); }
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
std::string last_line(const std::string& text) {
  const std::string t = text.ends_with('\n') ? text.substr(0, text.size() - 1) : text;
  return t.substr(t.rfind('\n') + 1);
}
// The "decode: N tokens" figure of the summary, -1 when absent.
long decode_tokens(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("decode: (\\d+) tokens")) ? std::stol(m[1]) : -1;
}

// A run far longer than the test: seed 1 samples 20000 tokens of this prompt without an end of text (minutes,
// where greedy decoding ends after 400); only a signal ends it in time.
std::vector<std::string> endless_run(const std::string& csv) {
  // --ignore-eos: the run must not end by itself, whatever text this CPU's float rounding samples.
  return {"run", "-m", model(), "--temp", "1", "--seed", "1", "-c", "32768", "-n", "1000000", "--ignore-eos",
          "-p", "Once upon a time", "--csv", csv};
}

// Sends `sig` once the run has printed its prompt and some generated text, and checks the summary, the CSV (its
// last line the summary, marked with the signal's name) and that the process ended by that signal.
void stop_run_with(int sig, const std::string& name) {
  const auto csv = tmp(name + ".csv");
  Child c(endless_run(csv));
  ASSERT_TRUE(c.started());
  ASSERT_TRUE(c.wait_for("Once upon a time", kStartTimeout)) << c.output();
  const size_t at = c.output().find("Once upon a time") + 16;
  ASSERT_TRUE(c.wait_for_size(at + 40, kStartTimeout)) << c.output();  // generated text has appeared
  c.send(sig);
  const auto st = c.wait_exit(kStopTimeout);
  ASSERT_TRUE(st.has_value()) << "still running " << kStopTimeout.count() << " ms after " << name << ":\n"
                              << c.output();
  EXPECT_TRUE(WIFSIGNALED(*st) && WTERMSIG(*st) == sig) << "wait status " << *st << "\n" << c.output();
  const std::string& out = c.output();
  EXPECT_NE(out.find("interrupted by " + name), std::string::npos) << out;
  const long n = decode_tokens(out);
  EXPECT_GT(n, 0) << out;
  EXPECT_LT(n, 32000) << out;  // stopped long before the context filled
  EXPECT_NE(out.find("peak RSS"), std::string::npos) << out;  // the whole summary
  EXPECT_EQ(out.find("moetier: "), std::string::npos) << out;  // no error, no warning
  const std::string text = slurp(csv);
  const std::string summary = last_line(text);
  EXPECT_EQ(summary.rfind("# summary ", 0), 0u) << summary;
  EXPECT_NE(summary.find(" interrupted=" + name), std::string::npos) << summary;
  EXPECT_NE(summary.find(" decode_tokens=" + std::to_string(n) + " "), std::string::npos) << summary;
  EXPECT_TRUE(text.ends_with("\n"));
}

TEST(Signal, CtrlCStopsARunWithItsSummaryAndExitStatus130) { stop_run_with(SIGINT, "SIGINT"); }

TEST(Signal, SigtermStopsARunWithItsSummaryAndExitStatus143) { stop_run_with(SIGTERM, "SIGTERM"); }

// A run blocked writing to a reader that has stopped reading cannot act on the first Ctrl-C; the second ends it
// at once, without the summary. The output pipe is shrunk to one page so that it fills after a few hundred tokens.
TEST(Signal, SecondCtrlCEndsAtOnce) {
  Child c(endless_run(tmp("twice.csv")), 4096);
  ASSERT_TRUE(c.started());
  ASSERT_TRUE(c.wait_for("Once upon a time", kStartTimeout)) << c.output();
  // Stop reading; wait until the pipe is full and stays so (the child blocked in a write). Filling 4 KiB takes
  // ~1000 tokens of the tiny model's short pieces: ~15 s here natively, over 60 s under qemu-user on a loaded
  // 2-core machine (scripts/test-arm64.sh), hence a wait of its own.
  constexpr milliseconds kFillTimeout{300000};
  const auto end = Clock::now() + kFillTimeout;
  int unread = -1, same = 0;
  while (Clock::now() < end && same < 3) {
    std::this_thread::sleep_for(milliseconds(200));
    const int now = c.unread_bytes();
    same = now > 4096 - 256 && now == unread ? same + 1 : 0;
    unread = now;
  }
  ASSERT_EQ(same, 3) << "the output pipe did not fill: " << unread << " bytes unread";
  c.send(SIGINT);
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(c.running()) << "the first Ctrl-C should only ask the run to stop";
  c.send(SIGINT);
  const auto st = c.wait_exit(kStopTimeout);
  ASSERT_TRUE(st.has_value()) << "a second Ctrl-C did not end the run";
  EXPECT_TRUE(WIFSIGNALED(*st) && WTERMSIG(*st) == SIGINT) << "wait status " << *st;
  EXPECT_EQ(c.output().find("interrupted by"), std::string::npos) << c.output();
}

// chat: Ctrl-C ends the reply, says so, and the next line gets a reply in the same context; end of input then
// ends the chat normally (exit status 0: the Ctrl-C was acted on). Seed 2 replies to "Hello" at length (3000
// tokens without an end of text).
TEST(Signal, CtrlCEndsAChatReplyAndTheChatGoesOn) {
  // -n bounds each reply: long enough that the first is still running when Ctrl-C comes (after 40 bytes). The
  // second runs to its end once input is closed: 600 tokens take ~40 s under qemu-user on a loaded 2-core machine
  // (scripts/test-arm64.sh; ~1000 tokens took over 60 s, see SecondCtrlCEndsAtOnce), hence a wait of its own.
  constexpr milliseconds kReplyTimeout{180000};
  Child c({"chat", "-m", model(), "--temp", "1", "--seed", "2", "-c", "32768", "-n", "600", "--no-think"});
  ASSERT_TRUE(c.started());
  ASSERT_TRUE(c.wait_for("chat format:", kStartTimeout)) << c.output();
  const std::string note = "[interrupted: the reply so far stays in the context]";
  const size_t start = c.output().size();
  ASSERT_TRUE(c.write_line("Hello"));
  ASSERT_TRUE(c.wait_for_size(start + 40, kStartTimeout)) << c.output();  // the reply is coming
  c.send(SIGINT);
  ASSERT_TRUE(c.wait_for(note, kStopTimeout, start)) << c.output();
  const size_t after_note = c.output().find(note, start) + note.size() + 1;
  ASSERT_TRUE(c.write_line("Tell me more"));
  EXPECT_TRUE(c.wait_for_size(after_note + 10, kStartTimeout)) << c.output();  // a second reply
  c.close_stdin();
  const auto st = c.wait_exit(kReplyTimeout);
  ASSERT_TRUE(st.has_value()) << c.output();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "wait status " << *st << "\n" << c.output();
  EXPECT_GT(decode_tokens(c.output()), 0) << c.output();
  EXPECT_EQ(c.output().find("interrupted by"), std::string::npos) << c.output();
}

// chat: Ctrl-C while waiting for a line ends the chat with the summary, and the process as Ctrl-C would.
TEST(Signal, CtrlCAtThePromptEndsTheChat) {
  Child c({"chat", "-m", model(), "--temp", "0", "-n", "8"});
  ASSERT_TRUE(c.started());
  ASSERT_TRUE(c.wait_for("chat format:", kStartTimeout)) << c.output();
  c.send(SIGINT);
  const auto st = c.wait_exit(kStopTimeout);
  ASSERT_TRUE(st.has_value()) << "chat still waiting for input after Ctrl-C:\n" << c.output();
  EXPECT_TRUE(WIFSIGNALED(*st) && WTERMSIG(*st) == SIGINT) << "wait status " << *st << "\n" << c.output();
  EXPECT_NE(c.output().find("interrupted by SIGINT"), std::string::npos) << c.output();
  EXPECT_NE(c.output().find("decode: 0 tokens"), std::string::npos) << c.output();
}

// A reader that leaves (`| head -c 10`) ends the run quietly, by SIGPIPE's default action, as cat or grep end.
TEST(Signal, ClosedPipeEndsQuietly) {
  const auto script = tmp("epipe.sh");
  std::ofstream(script) << "'" << test::cli_path() << "' run -m '" << model()
                        << "' --temp 0 -c 32768 -n 1000000 -p 'Once upon a time' 2>'" << tmp("epipe.err")
                        << "' | head -c 10 >/dev/null\necho \"status=${PIPESTATUS[0]}\"\n";
  const auto t0 = Clock::now();
  const auto old = std::signal(SIGPIPE, SIG_DFL);  // as a shell starts it (the Child tests ignore it here)
  std::FILE* p = popen(("bash '" + script + "'").c_str(), "r");
  std::signal(SIGPIPE, old);
  ASSERT_NE(p, nullptr);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, p);
  pclose(p);
  EXPECT_EQ(std::string(buf, n), "status=141\n");  // 128 + SIGPIPE
  EXPECT_LT(Clock::now() - t0, kStartTimeout);
  const std::string err = slurp(tmp("epipe.err"));
  EXPECT_EQ(err.find("error"), std::string::npos) << err;
}

}  // namespace
}  // namespace moetier
