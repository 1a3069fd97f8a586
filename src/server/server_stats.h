// What the server itself knows, for the monitor page (/v1/moetier/stats) and /metrics: its state, its slots and
// queue, and the last requests it answered. Filled by the scheduler (server/scheduler.h) under its lock and
// copied out for each stats request.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace moetier::server {

struct RequestRecord {
  int64_t id = 0;              // the server's request number
  std::string endpoint;        // "chat" or "completions"
  int slot = -1;               // slot that ran it
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;   // prompt tokens whose KV rows were kept from the slot's previous request
  int64_t completion_tokens = 0;
  double queue_ms = 0;         // waiting for a slot
  double ttft_ms = 0;          // from arrival to the first token sampled
  double decode_tps = 0;       // completion tokens after the first / their decode time
  std::string finish_reason;   // "stop", "length", "cancelled" (client gone), "error"
};

struct ServerStats {
  std::string state = "loading";  // "loading", then "ok"
  std::string model_id;           // the served model's id (its file name)
  std::vector<std::pair<std::string, std::string>> model_info;  // the start log's decisions (topic, text)
  int n_slots = 1;
  int64_t queue_depth = 0;        // requests waiting for a slot
  int64_t active = 0;             // requests running on a slot
  int64_t requests_total = 0;     // requests answered (any finish)
  int64_t prompt_tokens_total = 0, reused_tokens_total = 0, completion_tokens_total = 0;
  std::vector<RequestRecord> recent;  // the last requests, newest last (at most kRecentRequests)
};

inline constexpr size_t kRecentRequests = 32;

}  // namespace moetier::server
