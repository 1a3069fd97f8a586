// The reply objects in the OpenAI API's shapes (field names from the API reference: chat.completion,
// chat.completion.chunk, text_completion, usage, error), their SSE framing, and bodies that survive invalid UTF-8.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai_response.h"

namespace moetier::server {
namespace {

using nlohmann::json;

const ReplyId kId{"chatcmpl-abc", 1700000000, "qwen3-tiny"};

void expect_envelope(const json& j, const char* object) {
  EXPECT_EQ(j.at("id"), "chatcmpl-abc");
  EXPECT_EQ(j.at("object"), object);
  EXPECT_EQ(j.at("created"), 1700000000);
  EXPECT_EQ(j.at("model"), "qwen3-tiny");
}

void expect_usage(const json& u, int64_t prompt, int64_t completion, int64_t cached) {
  EXPECT_EQ(u.at("prompt_tokens"), prompt);
  EXPECT_EQ(u.at("completion_tokens"), completion);
  EXPECT_EQ(u.at("total_tokens"), prompt + completion);
  EXPECT_EQ(u.at("prompt_tokens_details").at("cached_tokens"), cached);
}

TEST(OpenAIResponse, ChatCompletion) {
  const json j = json::parse(to_body(chat_completion(kId, {"", "Hello!"}, "stop", {12, 3, 8})));
  expect_envelope(j, "chat.completion");
  ASSERT_EQ(j.at("choices").size(), 1u);
  const json& c = j["choices"][0];
  EXPECT_EQ(c.at("index"), 0);
  EXPECT_EQ(c.at("finish_reason"), "stop");
  EXPECT_EQ(c.at("message"), (json{{"role", "assistant"}, {"content", "Hello!"}}));  // no reasoning_content
  expect_usage(j.at("usage"), 12, 3, 8);
}

TEST(OpenAIResponse, ChatCompletionWithReasoningCutByLength) {
  const json j = chat_completion(kId, {"Let me think", ""}, "length", {5, 16, 0});
  const json& m = j["choices"][0]["message"];
  EXPECT_EQ(m.at("reasoning_content"), "Let me think");
  EXPECT_EQ(m.at("content"), "");  // a string even when empty
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST(OpenAIResponse, ChatChunks) {
  const json first = chat_chunk(kId, {}, true);
  expect_envelope(first, "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(first["choices"][0]["index"], 0);

  const json think = chat_chunk(kId, {"hmm", ""}, false);
  EXPECT_EQ(think["choices"][0]["delta"], (json{{"reasoning_content", "hmm"}}));
  const json text = chat_chunk(kId, {"", "Hi"}, false);
  EXPECT_EQ(text["choices"][0]["delta"], (json{{"content", "Hi"}}));
  const json both = chat_chunk(kId, {"a", "b"}, false);
  EXPECT_EQ(both["choices"][0]["delta"], (json{{"reasoning_content", "a"}, {"content", "b"}}));

  const json last = chat_chunk(kId, {}, false, "length");
  EXPECT_TRUE(last["choices"][0]["delta"].is_object());
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(last.contains("usage"));
}

TEST(OpenAIResponse, TextCompletionAndChunks) {
  const ReplyId id{"cmpl-1", 42, "m"};
  const json j = text_completion(id, " there", "stop", {2, 1, 0});
  EXPECT_EQ(j.at("object"), "text_completion");
  EXPECT_EQ(j.at("id"), "cmpl-1");
  EXPECT_EQ(j["choices"][0].at("text"), " there");
  EXPECT_EQ(j["choices"][0].at("index"), 0);
  EXPECT_EQ(j["choices"][0].at("finish_reason"), "stop");
  expect_usage(j.at("usage"), 2, 1, 0);

  const json c = text_chunk(id, "x");
  EXPECT_EQ(c.at("object"), "text_completion");
  EXPECT_EQ(c["choices"][0].at("text"), "x");
  EXPECT_TRUE(c["choices"][0].at("finish_reason").is_null());
  EXPECT_FALSE(c.contains("usage"));
  EXPECT_EQ(text_chunk(id, "", "length")["choices"][0]["finish_reason"], "length");
}

TEST(OpenAIResponse, UsageChunkHasNoChoices) {
  const json chat = usage_chunk(kId, true, {10, 4, 6});
  expect_envelope(chat, "chat.completion.chunk");
  EXPECT_TRUE(chat.at("choices").is_array());
  EXPECT_TRUE(chat.at("choices").empty());
  expect_usage(chat.at("usage"), 10, 4, 6);
  EXPECT_EQ(usage_chunk(kId, false, {1, 1, 0}).at("object"), "text_completion");
}

TEST(OpenAIResponse, ErrorObject) {
  EXPECT_EQ(error_object(400, "temperature: expected a number"),
            (json{{"error",
                   {{"message", "temperature: expected a number"},
                    {"type", "invalid_request_error"},
                    {"param", nullptr},
                    {"code", 400}}}}));
  EXPECT_EQ(error_object(401, "bad key")["error"]["type"], "invalid_request_error");
  EXPECT_EQ(error_object(500, "boom")["error"]["type"], "server_error");
  EXPECT_EQ(error_object(503, "loading")["error"]["code"], 503);
}

TEST(OpenAIResponse, SseEventIsOneDataLine) {
  const std::string e = sse_event(chat_chunk(kId, {"", "line one\nline two\n\n"}, false));
  ASSERT_GE(e.size(), 8u);
  EXPECT_EQ(e.substr(0, 6), "data: ");
  EXPECT_EQ(e.substr(e.size() - 2), "\n\n");
  const std::string payload = e.substr(6, e.size() - 8);
  EXPECT_EQ(payload.find('\n'), std::string::npos);  // newlines in the text are escaped, never end the event
  EXPECT_EQ(json::parse(payload)["choices"][0]["delta"]["content"], "line one\nline two\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

// Model text can hold invalid UTF-8 (a byte token, a reply cut mid-character); the body replaces each bad byte
// with U+FFFD instead of failing, and stays valid JSON.
TEST(OpenAIResponse, InvalidUtf8IsReplaced) {
  const std::string body = to_body(chat_completion(kId, {"r\xC3", "a\xFF" "b\xE2\x82"}, "length", {}));
  const json j = json::parse(body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "r\xEF\xBF\xBD");
  const std::string ev = sse_event(text_chunk({"cmpl-2", 1, "m\x80"}, "\xF0\x9F\x98"));
  const json k = json::parse(ev.substr(6, ev.size() - 8));
  EXPECT_EQ(k["model"], "m\xEF\xBF\xBD");
  EXPECT_EQ(k["choices"][0]["text"], "\xEF\xBF\xBD");
  // Valid multi-byte text is written as it is, not escaped.
  EXPECT_NE(to_body(text_chunk(kId, "caf\xC3\xA9")).find("caf\xC3\xA9"), std::string::npos);
}

}  // namespace
}  // namespace moetier::server
