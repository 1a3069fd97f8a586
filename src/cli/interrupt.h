// Ctrl-C (SIGINT) and SIGTERM during `run`, `chat` and `serve`: the first one asks generation (or the server) to
// stop, the second ends the process at once. The handler only stores the signal in a lock-free atomic and writes a byte to a pipe (both
// async-signal-safe); generation checks the flag between tokens and between prefill chunks, and chat's input
// reader wakes on the pipe. A stopped run prints its summary and closes its files; main() then ends the process
// with the signal's default action (exit status 130 for SIGINT, 143 for SIGTERM, as a shell reports it), so a
// script running moetier sees that it was interrupted.
//
//   StopSignals guard;              // handlers in place for the guard's life
//   while (!stop_signal()) ...      // generate
//   // after the callback: main() calls end_if_stopped()
//
// SIGPIPE keeps its default action: `moetier run ... | head -c 10` ends quietly at the first write after the
// reader left (exit status 141), as cat or grep do.
#pragma once

#include <atomic>
#include <string>

namespace moetier::cli {

// The stop request: 0, or the signal (SIGINT, SIGTERM) that asked to stop. Set by the handler, cleared by
// clear_stop(). Lives for the whole process, so main() can read it after a guard is gone.
const std::atomic<int>& stop_flag();
inline int stop_signal() { return stop_flag().load(std::memory_order_relaxed); }
// "SIGINT" or "SIGTERM" for the signal, for messages and the metrics CSV's summary.
std::string signal_name(int sig);
// Forgets a SIGINT that has been acted on (chat: a Ctrl-C that ended one reply), so the next Ctrl-C asks again
// rather than killing.
void clear_stop();
// When a stop was requested and acted on: ends the process as the signal's default action would (after the
// caller has flushed what it must). Returns when there was none.
void end_if_stopped();

// Installs the SIGINT and SIGTERM handlers (SA_RESTART: an interrupted read or write of the engine carries on)
// and restores the previous dispositions when destroyed. One at a time; not copyable.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

// Standard input a line at a time, for chat: waits with poll() on stdin and on the handler's pipe, so a Ctrl-C
// while waiting for a line is seen at once (a plain blocking read would be restarted under SA_RESTART).
class LineReader {
 public:
  enum class Result { line, end, stopped };
  // A line without its '\n' (a last line without one too); `end` at end of input, `stopped` when a stop was
  // requested before a whole line arrived (what was typed of it is kept). Throws moetier::Error when reading
  // standard input fails.
  Result next(std::string& line);

 private:
  std::string buf_;  // bytes read after the last line returned
  bool eof_ = false;
};

}  // namespace moetier::cli
