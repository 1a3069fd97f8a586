// moetier: run Mixture-of-Experts GGUF models larger than memory. Entry point: parses the subcommand and maps
// errors to exit codes (1: bad input, a runtime error or standard output that could not be written; CLI11's code,
// above 100, for a command line it cannot parse; a run, chat or server stopped by Ctrl-C or SIGTERM ends, after its
// summary, as that signal's default action would: 130 or 143 in a shell).
#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/output.h"
#include "util/error.h"

namespace {

// The message goes through stdio, not fmt::print, which would throw again when stderr itself cannot be written.
int report_error(const char* kind, const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "moetier: %s: %s\n", kind, what.c_str());
  return 1;
}

// llama.cpp's multi-letter single-dash flags, which CLI11 (one letter after a single dash) cannot declare: each is
// rewritten to its long form before parsing ("-ngl 99" and "-ngl=99" alike).
constexpr std::pair<std::string_view, std::string_view> kLlamaShortFlags[] = {{"-ngl", "--n-gpu-layers"}};

std::vector<std::string> with_long_flags(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    for (const auto& [short_form, long_form] : kLlamaShortFlags) {
      if (a == short_form) {
        a = long_form;
      } else if (a.starts_with(short_form) && a.size() > short_form.size() && a[short_form.size()] == '=') {
        a = std::string(long_form) + a.substr(short_form.size());
      }
    }
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  // Unbuffered: a write to stdout that fails does so in the call that made it, with its errno (a buffered stream
  // would lose the reason when it drops its buffer). The output is small or flushed per token anyway.
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  CLI::App app{"moetier " MOETIER_VERSION
               ": an inference engine for Mixture-of-Experts GGUF models larger than memory.\n"
               "Dense weights stay at hand; routed experts are read from the model file on demand and cached."};
  app.set_version_flag("--version", "moetier " MOETIER_VERSION);
  app.require_subcommand(1);
  app.footer("Exit status: 0 on success; 1 for bad input, a runtime error or standard output that could not be "
             "written; above 100 for a command line that does not parse. Ctrl-C (SIGINT) or SIGTERM stops `run`, "
             "`chat` and `serve` after the summary with the signal's status (130, 143); a second one ends at once.");
  moetier::cli::register_inspect(app);
  moetier::cli::register_synth(app);
  moetier::cli::register_run(app);
  moetier::cli::register_eval(app);
  moetier::cli::register_replay(app);
  moetier::cli::register_report(app);
  moetier::cli::register_serve(app);
  moetier::cli::register_devices(app);
  try {
    try {
      const std::vector<std::string> args = with_long_flags(argc, argv);
      std::vector<const char*> arg_ptrs;
      for (const std::string& a : args) arg_ptrs.push_back(a.c_str());
      app.parse(argc, arg_ptrs.data());
    } catch (const CLI::ParseError& e) {
      // CLI11 answers `moetier frob` with only "A subcommand is required": name the word it did not know.
      const auto known = [&](const CLI::App* sub) { return sub->check_name(argv[1]); };
      if (argc > 1 && argv[1][0] != '-' && app.get_subcommands(known).empty()) {
        std::string names;
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
          names += (names.empty() ? "" : ", ") + sub->get_name();
        std::fprintf(stderr, "moetier: error: unknown command '%s' (commands: %s; moetier --help for more)\n",
                     argv[1], names.c_str());
        return e.get_exit_code();
      }
      errno = 0;
      const int rc = app.exit(e);  // --help and --version print to std::cout
      moetier::cli::check_stdout(errno);
      return rc;
    }
    moetier::cli::check_stdout();
  } catch (const moetier::Error& e) {
    return report_error("error", e.what());
  } catch (const std::system_error& e) {
    // fmt::print throws this when a write to stdout or stderr fails.
    if (std::ferror(stdout) != 0) return report_error("error", "writing standard output failed: " + e.code().message());
    if (std::ferror(stderr) != 0) return 1;  // standard error cannot be written: nowhere to say more
    return report_error("internal error", e.what());
  } catch (const std::exception& e) {
    return report_error("internal error", e.what());
  }
  moetier::cli::end_if_stopped();
  return 0;
}
