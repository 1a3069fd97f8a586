// `moetier serve` as a test runs it: started on 127.0.0.1 with a free port (--port 0, read back from its log),
// waited for until it is ready, talked to over HTTP, stopped with SIGINT. Every wait is bounded.
#pragma once

#include <signal.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "test_support.h"

namespace moetier::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class ServeProcess {
 public:
  // Starts `moetier serve -m MODEL --port 0 ARGS...` with its stdout and stderr in LOG (under the test tmp dir) and
  // waits up to `timeout` for its "ready:" line. Fails the test (and leaves ok() false) when it exits or times out.
  ServeProcess(const std::string& name, const std::filesystem::path& model, const std::vector<std::string>& args,
               std::chrono::seconds timeout = std::chrono::seconds(120)) {
    log_ = tmp_dir("serve") / (name + ".log");
    std::vector<std::string> argv = {cli_path(), "serve", "-m", model.string(), "--port", "0", "-t", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    // Gone before the child starts: a previous run's log would show its "ready:" line and its port.
    std::filesystem::remove(log_);
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    while (std::chrono::steady_clock::now() - t0 < timeout) {
      const std::string text = read_file(log_);
      std::smatch m;
      if (port_ == 0 && std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      if (port_ != 0 && text.find("ready:") != std::string::npos) {
        ok_ = true;
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "moetier serve exited before it was ready:\n" << text;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "moetier serve was not ready after " << timeout.count() << " s:\n" << read_file(log_);
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool ok() const { return ok_; }
  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_file(log_); }
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(120, 0);
    c->set_connection_timeout(10, 0);
    return c;
  }

  // Sends `sig` and waits up to `timeout` for the exit; returns the exit status (128 + N for a signal), or -1 when
  // it did not end in time (it is then killed).
  int stop(int sig = SIGINT, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < timeout) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool ok_ = false;
};

// `s` as a JSON reply carries it: the tiny shared models sample byte tokens at random, and JSON text must be valid
// UTF-8, so the server (like any JSON writer) replaces each invalid sequence with U+FFFD.
inline std::string as_json_text(const std::string& s) {
  return nlohmann::json::parse(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

// The text `moetier run ARGS` generated: its stdout up to the blank line before the summary.
inline std::string run_output_text(const std::string& args) {
  const CliResult r = run_cli(args, "2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t end = r.output.rfind("\n\nprefill: ");
  EXPECT_NE(end, std::string::npos) << r.output;
  return end == std::string::npos ? r.output : r.output.substr(0, end);
}

// POSTs a JSON body and hands the reply's body to `receive` as it arrives; returning false from it closes the
// connection (a client that leaves).
inline httplib::Result post_receiving(httplib::Client& c, const std::string& path, const std::string& body,
                                      std::function<bool(const char*, size_t)> receive) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [receive](const char* d, size_t n, uint64_t, uint64_t) { return receive(d, n); };
  return c.send(req);
}

// The tiny shared MoE model the server tests serve (random weights, the 512-token SentencePiece vocabulary).
inline std::filesystem::path tiny_qwen() { return oracle_dir() / "models/tiny-qwen3moe-Q4_K_M.gguf"; }

// What `moetier run ARGS` generated, as a JSON reply carries it (what the server's text is compared with).
inline std::string run_text(const std::string& args) { return as_json_text(run_output_text(args)); }

// The data lines of a server-sent-event stream, in order ("[DONE]" included), comments skipped.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

}  // namespace moetier::test
