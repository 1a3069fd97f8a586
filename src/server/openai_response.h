// The JSON `moetier serve` answers with, in the OpenAI API's shapes: chat.completion and chat.completion.chunk,
// text_completion (streamed and not), the error object, and the server-sent-event framing of a stream.
//
// Source: the OpenAI API reference (objects "chat.completion", "chat.completion.chunk", "text_completion",
// "model", "list"; errors {"error": {"message", "type", "code"}}); llama-server's `reasoning_content` field for
// the reasoning part of a reply (DeepSeek's API name, which Open WebUI and the openai SDK pass through).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/reasoning.h"

namespace moetier::server {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV cache rows were reused (usage.prompt_tokens_details)
};

// Names one reply in every object sent for it.
struct ReplyId {
  std::string id;     // "chatcmpl-…" or "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;  // the served model's id
};

// finish_reason: "stop" (end of the reply or a stop string) or "length" (max_tokens or a full context).
// A reply with no reasoning has no reasoning_content field; content is a string (possibly empty).
nlohmann::json chat_completion(const ReplyId& r, const chat::ReplyDelta& reply, std::string_view finish_reason,
                               const Usage& usage);
// A chunk of a streamed chat reply. The first one carries role "assistant"; the last one (finish_reason set) an
// empty delta.
nlohmann::json chat_chunk(const ReplyId& r, const chat::ReplyDelta& delta, bool first,
                          std::string_view finish_reason = {});
nlohmann::json text_completion(const ReplyId& r, std::string_view text, std::string_view finish_reason,
                               const Usage& usage);
nlohmann::json text_chunk(const ReplyId& r, std::string_view text, std::string_view finish_reason = {});
// The last chunk when stream_options.include_usage: empty choices and the usage.
nlohmann::json usage_chunk(const ReplyId& r, bool chat, const Usage& usage);

// {"error": {"message": …, "type": "invalid_request_error" (4xx) | "server_error" (5xx), "code": status}}.
nlohmann::json error_object(int status, std::string_view message);

// One server-sent event: "data: " + the JSON (invalid UTF-8 replaced by U+FFFD) + "\n\n".
std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// The JSON as a response body (invalid UTF-8 replaced by U+FFFD, never an exception).
std::string to_body(const nlohmann::json& j);

}  // namespace moetier::server
