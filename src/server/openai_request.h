// The OpenAI requests `moetier serve` accepts, parsed and checked: POST /v1/chat/completions, POST
// /v1/completions, and llama-server's /tokenize and /detokenize. Every field is checked for its JSON type and
// range; anything wrong is a RequestError (HTTP 400) whose message names the field, e.g. "temperature: expected a
// number in [0, 2], got \"hot\"". Unknown fields are ignored, as OpenAI's server does.
//
// Source: the OpenAI API reference (Chat Completions and Completions: messages, stream, stream_options, max_tokens
// / max_completion_tokens, temperature, top_p, n, stop, presence_penalty, frequency_penalty, seed); llama-server's
// extensions (top_k, min_p, repeat_penalty, repeat_last_n, chat_template_kwargs, reasoning_effort).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "chat/conversation.h"
#include "sample/sampler.h"

namespace moetier::server {

// An answer other than 200 for a request: HTTP status (400, 401, 404, 413, ...) and a message for the client.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// What a request gets for the fields it leaves out: the server's flags (--temp, --top-k, ... as `run` has them).
struct RequestDefaults {
  sample::SamplerParams sampling;  // sampling.seed is unused: see `seed`
  std::optional<uint64_t> seed;    // the seed of a request without "seed" (serve --seed N); unset: a random one
  int64_t max_tokens = -1;         // -1: until the end of the reply or a full context
};

struct CompletionRequest {
  bool chat = true;                     // /v1/chat/completions (messages) or /v1/completions (prompt)
  std::vector<chat::Message> messages;  // chat: at least one; content a string or a list of {"type":"text"} parts
  std::string prompt;                   // completions: the prompt text (a string, or a list of one string)
  std::vector<int32_t> prompt_tokens;   // completions: the prompt as token ids, when a list of integers is given
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage: a last chunk with `usage`
  sample::SamplerParams sampling;       // temperature, top_p, top_k, min_p, repeat_penalty, repeat_last_n,
                                        // presence_penalty, frequency_penalty, seed (an integer in [0, 2^64);
                                        // absent or null: a random one from std::random_device), logit_bias
                                        // ({"id": bias in [-100, 100]}, at most 300; the ids are checked against
                                        // the vocabulary when the request's sampler is made)
  int64_t max_tokens = -1;              // max_completion_tokens, else max_tokens; -1: none (>= 0 when given)
  std::vector<std::string> stop;        // "stop": a string or a list of up to 16, each 1 to 512 bytes
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
  std::string reasoning_effort;         // "", "low", "medium", "high" (harmony)
  std::string model;                    // as sent (the reply names the served model anyway)
  bool cache_prompt = true;             // llama-server's: keep the slot's common prefix (false: prefill it all)
};

// Throws RequestError(400) for a body that is not a JSON object, a field of the wrong type or out of range, n
// other than 1, no messages (or no prompt), an unknown role, and for logprobs, tools or response_format, which
// are not supported (the message says so).
//
// Details: null means "not given" for every field. Integer fields take 3.0 but not 3.5 (JavaScript clients send
// whole numbers as doubles). A content list's text parts are joined without a separator; other part types
// (image_url, input_audio, ...) are refused naming them; an assistant message may have null content. Refused as
// not supported: logprobs true, top_logprobs > 0, a non-empty tools list, tool_choice other than "none",
// response_format other than {"type": "text"}; for completions also logprobs > 0, echo true, a non-empty suffix,
// best_of other than 1. A completion prompt is a non-empty string, a list of one string, a list of token ids or
// a list of one such list.
CompletionRequest parse_chat_request(std::string_view body, const RequestDefaults& defaults);
CompletionRequest parse_completion_request(std::string_view body, const RequestDefaults& defaults);

// POST /tokenize {"content": string, "add_special": bool = false, "parse_special": bool = true}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
};
TokenizeRequest parse_tokenize_request(std::string_view body);
// POST /detokenize {"tokens": [int, ...]}: the ids (each checked against n_vocab).
std::vector<int32_t> parse_detokenize_request(std::string_view body, int64_t n_vocab);

}  // namespace moetier::server
