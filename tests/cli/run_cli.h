// Runs the moetier binary as a user would, capturing its output and exit status.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "test_support.h"

namespace moetier::test {

struct CliResult {
  int exit_code = -1;    // exit status; -1 if it did not exit normally
  bool signaled = false;  // killed by a signal (a crash)
  std::string output;     // stdout and stderr together
};

// Runs a shell command line as given, capturing its standard output and exit status.
inline CliResult run_shell(const std::string& cmd) {
  CliResult r;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  // popen runs through /bin/sh, which reports a child killed by signal N as exit status 128 + N.
  r.signaled = WIFSIGNALED(status) || (r.exit_code > 128 && r.exit_code < 160);
  return r;
}

// `redirect` is the shell redirection after the arguments: stderr joins stdout by default.
inline CliResult run_cli(const std::string& args, const std::string& redirect = "2>&1") {
  return run_shell(cli_path() + " " + args + " " + redirect);
}

// A file's whole text (a metrics CSV, a route trace); empty when it cannot be read.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace moetier::test
