#include "server/openai_response.h"

#include <string>

namespace moetier::server {

namespace {

using nlohmann::json;

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

// finish_reason is null in every chunk but the last, as the API sends it.
json finish(std::string_view reason) { return reason.empty() ? json(nullptr) : json(std::string(reason)); }

json envelope(const ReplyId& r, const char* object) {
  return {{"id", r.id}, {"object", object}, {"created", r.created}, {"model", r.model}};
}

}  // namespace

json chat_completion(const ReplyId& r, const chat::ReplyDelta& reply, std::string_view finish_reason,
                     const Usage& usage) {
  json message = {{"role", "assistant"}, {"content", reply.content}};
  if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
  json j = envelope(r, "chat.completion");
  j["choices"] = json::array(
      {{{"index", 0}, {"message", std::move(message)}, {"logprobs", nullptr}, {"finish_reason", finish(finish_reason)}}});
  j["usage"] = usage_json(usage);
  return j;
}

json chat_chunk(const ReplyId& r, const chat::ReplyDelta& delta, bool first, std::string_view finish_reason) {
  json d = json::object();
  // The first chunk names the role and carries content (possibly ""), as OpenAI's first chunk does; later chunks
  // carry only the parts that have text.
  if (first) {
    d["role"] = "assistant";
    d["content"] = delta.content;
  } else if (!delta.content.empty()) {
    d["content"] = delta.content;
  }
  if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
  json j = envelope(r, "chat.completion.chunk");
  j["choices"] = json::array(
      {{{"index", 0}, {"delta", std::move(d)}, {"logprobs", nullptr}, {"finish_reason", finish(finish_reason)}}});
  return j;
}

json text_completion(const ReplyId& r, std::string_view text, std::string_view finish_reason, const Usage& usage) {
  json j = envelope(r, "text_completion");
  j["choices"] = json::array({{{"index", 0},
                               {"text", std::string(text)},
                               {"logprobs", nullptr},
                               {"finish_reason", finish(finish_reason)}}});
  j["usage"] = usage_json(usage);
  return j;
}

json text_chunk(const ReplyId& r, std::string_view text, std::string_view finish_reason) {
  // The Completions API streams objects of the same type as the whole reply, one piece of text each.
  json j = envelope(r, "text_completion");
  j["choices"] = json::array({{{"index", 0},
                               {"text", std::string(text)},
                               {"logprobs", nullptr},
                               {"finish_reason", finish(finish_reason)}}});
  return j;
}

json usage_chunk(const ReplyId& r, bool chat, const Usage& usage) {
  json j = envelope(r, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

json error_object(int status, std::string_view message) {
  return {{"error",
           {{"message", std::string(message)},
            {"type", status >= 500 ? "server_error" : "invalid_request_error"},
            {"param", nullptr},
            {"code", status}}}};
}

std::string sse_event(const json& j) {
  std::string out = "data: ";
  out += to_body(j);
  out += "\n\n";
  return out;
}

std::string to_body(const json& j) {
  // error_handler_t::replace writes U+FFFD for each invalid byte where the default (strict) handler throws
  // type_error 316: model text is not always valid UTF-8 (a reply cut mid-character, a byte token).
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace moetier::server
