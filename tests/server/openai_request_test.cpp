// OpenAI request bodies: what each field becomes, and a 400 naming the field, what was expected and what came
// for every wrong type, range, and unsupported feature.
#include <algorithm>
#include <utility>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/openai_request.h"

namespace moetier::server {
namespace {

RequestDefaults defaults() {
  RequestDefaults d;
  d.sampling.temperature = 0.7f;
  d.sampling.top_k = 20;
  d.sampling.top_p = 0.8f;
  d.sampling.min_p = 0.01f;
  d.sampling.repeat_penalty = 1.1f;
  d.sampling.repeat_last_n = 32;
  d.max_tokens = 123;
  return d;
}

const std::string kUser = R"("messages": [{"role": "user", "content": "hi"}])";

// A chat body: the one user message plus `extra` members.
std::string chat(const std::string& extra = "") { return "{" + kUser + (extra.empty() ? "" : ", " + extra) + "}"; }

// The RequestError's message for a body that `parse` must refuse with 400.
std::string request_error(CompletionRequest (*parse)(std::string_view, const RequestDefaults&),
                          const std::string& body) {
  try {
    parse(body, defaults());
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}
std::string chat_error(const std::string& body) { return request_error(parse_chat_request, body); }
std::string completion_error(const std::string& body) { return request_error(parse_completion_request, body); }

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(OpenAIRequest, MinimalChatTakesTheDefaults) {
  const CompletionRequest r = parse_chat_request(chat(), defaults());
  EXPECT_TRUE(r.chat);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, chat::Role::user);
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 123);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.enable_thinking.has_value());
  EXPECT_EQ(r.reasoning_effort, "");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.8f);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.01f);
  EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(r.sampling.repeat_last_n, 32);
  EXPECT_EQ(r.sampling.presence_penalty, 0.0f);
  EXPECT_EQ(r.sampling.frequency_penalty, 0.0f);
}

TEST(OpenAIRequest, EveryFieldIsRead) {
  const CompletionRequest r = parse_chat_request(
      R"({"model": "m1", "stream": true, "stream_options": {"include_usage": true},
          "messages": [{"role": "system", "content": "be brief"},
                       {"role": "developer", "content": "dev"},
                       {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": null},
                       {"role": "assistant", "content": "ok", "name": "x"},
                       {"role": "user", "content": "again"}],
          "temperature": 1.5, "top_p": 0.5, "top_k": 7, "min_p": 0.25, "repeat_penalty": 1.3,
          "repeat_last_n": 16, "presence_penalty": -0.5, "frequency_penalty": 1.25, "seed": 42,
          "max_tokens": 9, "n": 1, "stop": ["END", "\n\n"],
          "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "high",
          "logprobs": false, "tool_choice": "none", "tools": [], "response_format": {"type": "text"},
          "user": "ignored", "unknown_field": {"x": [1, 2]}})",
      defaults());
  EXPECT_EQ(r.model, "m1");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].role, chat::Role::system);
  EXPECT_EQ(r.messages[1].role, chat::Role::developer);
  EXPECT_EQ(r.messages[2].role, chat::Role::user);
  EXPECT_EQ(r.messages[2].content, "ab");
  EXPECT_EQ(r.messages[3].role, chat::Role::assistant);
  EXPECT_EQ(r.messages[3].content, "");
  EXPECT_EQ(r.messages[4].content, "ok");
  EXPECT_EQ(r.messages[5].content, "again");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.25f);
  EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.3f);
  EXPECT_EQ(r.sampling.repeat_last_n, 16);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 1.25f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"END", "\n\n"}));
  ASSERT_TRUE(r.enable_thinking.has_value());
  EXPECT_FALSE(*r.enable_thinking);
  EXPECT_EQ(r.reasoning_effort, "high");
}

TEST(OpenAIRequest, NullMeansNotGiven) {
  const CompletionRequest r = parse_chat_request(
      chat(R"("temperature": null, "max_tokens": null, "stop": null, "seed": null, "n": null, "stream": null,
              "logprobs": null, "tools": null, "tool_choice": null, "response_format": null, "model": null,
              "reasoning_effort": null, "chat_template_kwargs": null)"),
      defaults());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_EQ(r.max_tokens, 123);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
}

TEST(OpenAIRequest, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(parse_chat_request(chat(R"("max_tokens": 10, "max_completion_tokens": 20)"), defaults()).max_tokens, 20);
  EXPECT_EQ(parse_chat_request(chat(R"("max_completion_tokens": 5, "max_tokens": 10)"), defaults()).max_tokens, 5);
  EXPECT_EQ(parse_chat_request(chat(R"("max_tokens": 10, "max_completion_tokens": null)"), defaults()).max_tokens, 10);
  EXPECT_EQ(parse_chat_request(chat(R"("max_tokens": 0)"), defaults()).max_tokens, 0);
  EXPECT_TRUE(has(chat_error(chat(R"("max_completion_tokens": -1)")), "max_completion_tokens: expected an integer"));
  EXPECT_TRUE(has(chat_error(chat(R"("max_tokens": 10, "max_completion_tokens": "many")")), "max_completion_tokens"));
}

TEST(OpenAIRequest, SeedIsAnUnsigned64BitInteger) {
  EXPECT_EQ(parse_chat_request(chat(R"("seed": 0)"), defaults()).sampling.seed, 0u);
  EXPECT_EQ(parse_chat_request(chat(R"("seed": 18446744073709551615)"), defaults()).sampling.seed,
            18446744073709551615u);
  EXPECT_EQ(parse_chat_request(chat(R"("seed": 7.0)"), defaults()).sampling.seed, 7u);
  for (const char* bad : {"-1", "1.5", "\"5\"", "true", "1e30", "18446744073709551616", "[1]"}) {
    const std::string msg = chat_error(chat(std::string(R"("seed": )") + bad));
    EXPECT_TRUE(starts_with(msg, "seed: expected an integer in [0, 2^64), got ")) << msg;
  }
}

// Without a seed each request draws its own (two equal 64-bit draws: probability 2^-64).
TEST(OpenAIRequest, NoSeedIsRandom) {
  const uint64_t a = parse_chat_request(chat(), defaults()).sampling.seed;
  const uint64_t b = parse_chat_request(chat(R"("seed": null)"), defaults()).sampling.seed;
  const uint64_t c = parse_chat_request(chat(), defaults()).sampling.seed;
  EXPECT_FALSE(a == b && b == c);
}

TEST(OpenAIRequest, RangeEndsAreAccepted) {
  const CompletionRequest lo = parse_chat_request(
      chat(R"("temperature": 0, "top_p": 1, "min_p": 0, "top_k": 0, "repeat_last_n": 0,
              "presence_penalty": -2, "frequency_penalty": -2, "repeat_penalty": 0.01)"),
      defaults());
  EXPECT_EQ(lo.sampling.temperature, 0.0f);
  EXPECT_EQ(lo.sampling.top_p, 1.0f);
  EXPECT_EQ(lo.sampling.top_k, 0);
  EXPECT_EQ(lo.sampling.presence_penalty, -2.0f);
  const CompletionRequest hi = parse_chat_request(
      chat(R"("temperature": 2, "top_p": 0.001, "min_p": 0.999, "presence_penalty": 2, "frequency_penalty": 2,
              "top_k": 3.0, "repeat_last_n": 2147483647)"),
      defaults());
  EXPECT_EQ(hi.sampling.temperature, 2.0f);
  EXPECT_EQ(hi.sampling.frequency_penalty, 2.0f);
  EXPECT_EQ(hi.sampling.top_k, 3);
  EXPECT_EQ(hi.sampling.repeat_last_n, 2147483647);
}

struct Bad {
  const char* member;    // "field": value, as it goes into the body
  const char* prefix;    // the message starts with this: the field and what was expected
  const char* got;       // and ends with what came
};

TEST(OpenAIRequest, WrongTypesAndRangesNameTheField) {
  const Bad cases[] = {
      {R"("temperature": 2.5)", "temperature: expected a number in [0, 2]", "got 2.5"},
      {R"("temperature": -0.1)", "temperature: expected a number in [0, 2]", "got -0.1"},
      {R"("temperature": "hot")", "temperature: expected a number in [0, 2]", R"(got "hot")"},
      {R"("temperature": true)", "temperature: expected a number in [0, 2]", "got true"},
      {R"("temperature": [1])", "temperature: expected a number in [0, 2]", "got an array of 1 items"},
      {R"("top_p": 0)", "top_p: expected a number in (0, 1]", "got 0"},
      {R"("top_p": 1.01)", "top_p: expected a number in (0, 1]", "got 1.01"},
      {R"("min_p": 1)", "min_p: expected a number in [0, 1)", "got 1"},
      {R"("min_p": -0.5)", "min_p: expected a number in [0, 1)", "got -0.5"},
      {R"("top_k": -1)", "top_k: expected an integer >= 0", "got -1"},
      {R"("top_k": 2.5)", "top_k: expected an integer >= 0", "got 2.5"},
      {R"("top_k": false)", "top_k: expected an integer >= 0", "got false"},
      {R"("top_k": 3000000000)", "top_k: expected an integer >= 0", "got 3000000000"},
      {R"("top_k": 1e300)", "top_k: expected an integer >= 0", "got 1e+300"},
      {R"("repeat_penalty": 0)", "repeat_penalty: expected a number > 0", "got 0"},
      {R"("repeat_penalty": 1e300)", "repeat_penalty: expected a number > 0", "got 1e+300"},
      {R"("repeat_last_n": -64)", "repeat_last_n: expected an integer >= 0", "got -64"},
      {R"("repeat_last_n": 64.5)", "repeat_last_n: expected an integer >= 0", "got 64.5"},
      {R"("presence_penalty": 2.5)", "presence_penalty: expected a number in [-2, 2]", "got 2.5"},
      {R"("frequency_penalty": -3)", "frequency_penalty: expected a number in [-2, 2]", "got -3"},
      {R"("frequency_penalty": "0")", "frequency_penalty: expected a number in [-2, 2]", R"(got "0")"},
      {R"("max_tokens": -5)", "max_tokens: expected an integer >= 0", "got -5"},
      {R"("max_tokens": 10.5)", "max_tokens: expected an integer >= 0", "got 10.5"},
      {R"("max_tokens": 1e19)", "max_tokens: expected an integer >= 0", "got 1e+19"},
      {R"("max_tokens": 18446744073709551615)", "max_tokens: expected an integer >= 0", "got 18446744073709551615"},
      {R"("stream": 1)", "stream: expected a boolean", "got 1"},
      {R"("stream": "true")", "stream: expected a boolean", R"(got "true")"},
      {R"("stream_options": true)", "stream_options: expected an object", "got true"},
      {R"("stream_options": {"include_usage": 1})", "stream_options.include_usage: expected a boolean", "got 1"},
      {R"("model": 3)", "model: expected a string", "got 3"},
      {R"("n": "1")", "n: expected an integer", R"(got "1")"},
      {R"("n": 1.5)", "n: expected an integer", "got 1.5"},
      {R"("stop": "")", "stop: expected a non-empty string of at most 512 bytes", R"(got "")"},
      {R"("stop": 5)", "stop: expected a string or an array of strings", "got 5"},
      {R"("stop": ["a", ""])", "stop[1]: expected a non-empty string", R"(got "")"},
      {R"("stop": ["a", 7])", "stop[1]: expected a non-empty string", "got 7"},
      {R"("stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])",
       "stop: expected at most 16 strings", "got an array of 17 items"},
      {R"("chat_template_kwargs": [])", "chat_template_kwargs: expected an object", "got an array of 0 items"},
      {R"("chat_template_kwargs": {"enable_thinking": "no"})", "chat_template_kwargs.enable_thinking: expected a boolean",
       R"(got "no")"},
      {R"("chat_template_kwargs": {"enable_thinking": 0})", "chat_template_kwargs.enable_thinking: expected a boolean",
       "got 0"},
      {R"("reasoning_effort": "max")", R"(reasoning_effort: expected one of "low", "medium", "high")", R"(got "max")"},
      {R"("reasoning_effort": 2)", "reasoning_effort: expected a string", "got 2"},
      {R"("logprobs": "yes")", "logprobs: expected a boolean", R"(got "yes")"},
      {R"("tools": {})", "tools: expected an array", "got an object"},
      {R"("response_format": "json")", "response_format: expected an object", R"(got "json")"},
  };
  for (const Bad& c : cases) {
    const std::string msg = chat_error(chat(c.member));
    EXPECT_TRUE(starts_with(msg, c.prefix)) << c.member << " -> " << msg;
    EXPECT_TRUE(msg.size() >= std::string(c.got).size() &&
                msg.compare(msg.size() - std::string(c.got).size(), std::string::npos, c.got) == 0)
        << c.member << " -> " << msg;
  }
}

// Numbers past the double range fail inside the JSON parser; the error still names the field being read.
TEST(OpenAIRequest, HugeNumberLiteralsNameTheirField) {
  EXPECT_EQ(chat_error(chat(R"("temperature": 1e999)")),
            "temperature: expected a number within the double range, got 1e999");
  EXPECT_TRUE(starts_with(chat_error(chat(R"("stop": ["a", -1e400])")), "stop[1]: ")) << chat_error(chat(R"("stop": ["a", -1e400])"));
  EXPECT_TRUE(starts_with(chat_error(R"({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": 1e500}]})"),
                          "messages[1].content: "));
  EXPECT_TRUE(starts_with(chat_error(R"({"chat_template_kwargs": {"a": [[1, 2], {"b": 1E+999}]}})"),
                          "chat_template_kwargs.a[1].b: "));
  // A 400-digit integer: shown cut short.
  const std::string msg = chat_error(chat(R"("max_tokens": 1)" + std::string(400, '0')));
  EXPECT_TRUE(starts_with(msg, "max_tokens: expected a number within the double range")) << msg;
  EXPECT_LT(msg.size(), 160u) << msg;
}

TEST(OpenAIRequest, LongWrongValuesAreCutShort) {
  const std::string msg = chat_error(chat(R"("temperature": ")" + std::string(5000, 'x') + "\""));
  EXPECT_TRUE(starts_with(msg, "temperature: expected a number in [0, 2], got \"xxxx")) << msg;
  EXPECT_TRUE(has(msg, "(5000 bytes)")) << msg;
  EXPECT_LT(msg.size(), 140u);
  // A cut never splits a character: 20 three-byte characters (60 bytes) are cut after 13 of them (39 bytes).
  std::string euros;
  for (int i = 0; i < 20; ++i) euros += "\xE2\x82\xAC";
  const std::string m2 = chat_error(chat(R"("model": 1, "stop": [")" + euros + R"(", 5])"));
  EXPECT_TRUE(starts_with(m2, "model: expected a string")) << m2;
  const std::string m3 = chat_error(chat(R"("reasoning_effort": ")" + euros + "\""));
  EXPECT_TRUE(has(m3, "got \"" + euros.substr(0, 39) + "\"... (60 bytes)")) << m3;
}

TEST(OpenAIRequest, OnlyOneChoice) {
  EXPECT_EQ(chat_error(chat(R"("n": 2)")), "n: only 1 is supported, got 2");
  EXPECT_TRUE(starts_with(chat_error(chat(R"("n": 0)")), "n: only 1 is supported"));
  EXPECT_NO_THROW(parse_chat_request(chat(R"("n": 1)"), defaults()));
  EXPECT_NO_THROW(parse_chat_request(chat(R"("n": 1.0)"), defaults()));
}

TEST(OpenAIRequest, UnsupportedFeaturesSaySo) {
  for (const char* member : {R"("logprobs": true)", R"("top_logprobs": 3)", R"("tools": [{"type": "function"}])",
                             R"("tool_choice": "auto")", R"("tool_choice": {"type": "function"})",
                             R"("response_format": {"type": "json_object"})"}) {
    const std::string msg = chat_error(chat(member));
    EXPECT_TRUE(has(msg, "not supported")) << member << " -> " << msg;
    const std::string name = std::string(member).substr(1, std::string(member).find('"', 1) - 1);
    EXPECT_TRUE(starts_with(msg, name + (name == "response_format" ? ".type: " : ": "))) << msg;
    EXPECT_TRUE(has(msg, "got ")) << msg;
  }
  EXPECT_NO_THROW(parse_chat_request(chat(R"("top_logprobs": 0, "logprobs": false)"), defaults()));
}

TEST(OpenAIRequest, MessagesAreChecked) {
  const Bad cases[] = {
      {"", "messages: expected a non-empty array of messages", "got null"},
      {R"("messages": [])", "messages: expected a non-empty array of messages", "got an array of 0 items"},
      {R"("messages": "hi")", "messages: expected a non-empty array of messages", R"(got "hi")"},
      {R"("messages": [1])", "messages[0]: expected an object with role and content", "got 1"},
      {R"("messages": [{"content": "x"}])", "messages[0].role: expected a string", "got null"},
      {R"("messages": [{"role": 1, "content": "x"}])", "messages[0].role: expected a string", "got 1"},
      {R"("messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "x"}])",
       R"(messages[1].role: expected one of "system", "developer", "user", "assistant")", R"(got "tool")"},
      {R"("messages": [{"role": "user", "content": null}])",
       "messages[0].content: expected a string or an array of text parts", "got null"},
      {R"("messages": [{"role": "user"}])", "messages[0].content: expected a string or an array of text parts",
       "got null"},
      {R"("messages": [{"role": "system", "content": 5}])",
       "messages[0].content: expected a string or an array of text parts", "got 5"},
      {R"("messages": [{"role": "user", "content": ["x"]}])", "messages[0].content[0]: expected an object", R"(got "x")"},
      {R"("messages": [{"role": "user", "content": [{"text": "x"}]}])", "messages[0].content[0].type: expected \"text\"",
       "got null"},
      {R"("messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}])",
       "messages[0].content[0].text: expected a string", "got 3"},
      {R"("messages": [{"role": "user", "content": [{"type": "text"}]}])",
       "messages[0].content[0].text: expected a string", "got null"},
  };
  for (const Bad& c : cases) {
    const std::string msg = chat_error(std::string("{") + c.member + "}");
    EXPECT_TRUE(starts_with(msg, c.prefix)) << c.member << " -> " << msg;
    EXPECT_TRUE(msg.compare(msg.size() - std::min(msg.size(), std::string(c.got).size()), std::string::npos, c.got) == 0)
        << c.member << " -> " << msg;
  }
  // Parts of another type are named.
  const std::string img = chat_error(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "look"},
                                                     {"type": "image_url", "image_url": {"url": "x"}}]}]})");
  EXPECT_TRUE(starts_with(img, "messages[0].content[1].type: expected \"text\", got \"image_url\"")) << img;
  EXPECT_TRUE(has(img, "only text parts are supported")) << img;
}

TEST(OpenAIRequest, BodiesThatAreNotAJsonObject) {
  for (const std::string body : {"", "{", "not json", "{\"messages\": [}", "{\"a\": 1,}", "nul"}) {
    const std::string msg = chat_error(body);
    EXPECT_TRUE(starts_with(msg, "the request body: expected JSON")) << body << " -> " << msg;
  }
  EXPECT_EQ(chat_error("[1, 2]"), "the request body: expected a JSON object, got an array of 2 items");
  EXPECT_EQ(chat_error("\"hi\""), "the request body: expected a JSON object, got \"hi\"");
  EXPECT_EQ(chat_error("null"), "the request body: expected a JSON object, got null");
  // Invalid UTF-8 inside a string (JSON text must be UTF-8).
  EXPECT_TRUE(starts_with(chat_error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\xFF\"}]}"),
                          "the request body: expected JSON"));
  // Deep nesting is parsed without recursion and refused for its shape.
  const std::string deep = "{" + kUser + ", \"stop\": " + std::string(20000, '[') + std::string(20000, ']') + "}";
  EXPECT_TRUE(starts_with(chat_error(deep), "stop[0]: expected a non-empty string of at most 512 bytes, got an array of 1 items"));
}

TEST(OpenAIRequest, CompletionPrompts) {
  const CompletionRequest s = parse_completion_request(R"({"prompt": "Once upon", "max_tokens": 4})", defaults());
  EXPECT_FALSE(s.chat);
  EXPECT_EQ(s.prompt, "Once upon");
  EXPECT_TRUE(s.prompt_tokens.empty());
  EXPECT_EQ(s.max_tokens, 4);
  EXPECT_EQ(parse_completion_request(R"({"prompt": ["one"]})", defaults()).prompt, "one");
  EXPECT_EQ(parse_completion_request(R"({"prompt": [1, 2, 3]})", defaults()).prompt_tokens,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request(R"({"prompt": [[5, 6]]})", defaults()).prompt_tokens,
            (std::vector<int32_t>{5, 6}));
  const CompletionRequest all = parse_completion_request(
      R"({"prompt": "x", "stream": true, "stop": "\n", "temperature": 0, "seed": 3, "echo": false, "logprobs": 0,
          "best_of": 1, "suffix": ""})",
      defaults());
  EXPECT_TRUE(all.stream);
  EXPECT_EQ(all.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(all.sampling.seed, 3u);

  constexpr const char* kShape = "prompt: expected a non-empty string, an array of one string, or an array of token ids";
  for (const char* body : {R"({})", R"({"prompt": null})", R"({"prompt": ""})", R"({"prompt": []})",
                           R"({"prompt": ["a", "b"]})", R"({"prompt": 5})", R"({"prompt": [[1], [2]]})",
                           R"({"prompt": [1, "a"]})", R"({"prompt": {"text": "a"}})", R"({"prompt": [[]]})"}) {
    const std::string msg = completion_error(body);
    EXPECT_TRUE(starts_with(msg, kShape)) << body << " -> " << msg;
  }
  // Stop strings up to 512 bytes.
  const std::string s512(512, 's');
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "stop": [")" + s512 + R"("]})", defaults()).stop[0], s512);
  EXPECT_TRUE(starts_with(completion_error(R"({"prompt": "x", "stop": ["a", ")" + s512 + R"(s"]})"),
                          "stop[1]: expected a non-empty string of at most 512 bytes, got \"sss"));
  EXPECT_TRUE(starts_with(completion_error(R"({"prompt": "x", "stop": ")" + s512 + R"(s"})"),
                          "stop: expected a non-empty string of at most 512 bytes, got \"sss"));
  EXPECT_EQ(completion_error(R"({"prompt": [1, -2]})"), "prompt[1]: expected a token id >= 0, got -2");
  EXPECT_EQ(completion_error(R"({"prompt": [1.5]})"), "prompt[0]: expected a token id >= 0, got 1.5");
  EXPECT_EQ(completion_error(R"({"prompt": [3000000000]})"), "prompt[0]: expected a token id >= 0, got 3000000000");
  EXPECT_TRUE(has(completion_error(R"({"prompt": "x", "logprobs": 2})"), "logprobs: not supported"));
  EXPECT_TRUE(has(completion_error(R"({"prompt": "x", "echo": true})"), "echo: not supported"));
  EXPECT_TRUE(has(completion_error(R"({"prompt": "x", "suffix": "end"})"), "suffix: not supported"));
  EXPECT_EQ(completion_error(R"({"prompt": "x", "best_of": 3})"), "best_of: only 1 is supported, got 3");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "n": 4})"), "n: only 1 is supported, got 4");
  EXPECT_TRUE(starts_with(completion_error(R"({"prompt": "x", "top_p": 0})"), "top_p: expected a number in (0, 1]"));
}

TEST(OpenAIRequest, TokenizeAndDetokenize) {
  const TokenizeRequest t = parse_tokenize_request(R"({"content": "hello"})");
  EXPECT_EQ(t.content, "hello");
  EXPECT_FALSE(t.add_special);
  EXPECT_TRUE(t.parse_special);
  const TokenizeRequest u = parse_tokenize_request(R"({"content": "", "add_special": true, "parse_special": false})");
  EXPECT_EQ(u.content, "");
  EXPECT_TRUE(u.add_special);
  EXPECT_FALSE(u.parse_special);
  auto tok_error = [](const std::string& body) -> std::string {
    try {
      parse_tokenize_request(body);
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.what();
    }
    ADD_FAILURE() << body;
    return {};
  };
  EXPECT_EQ(tok_error("{}"), "content: expected a string, got null");
  EXPECT_EQ(tok_error(R"({"content": 5})"), "content: expected a string, got 5");
  EXPECT_EQ(tok_error(R"({"content": "a", "add_special": "yes"})"), "add_special: expected a boolean, got \"yes\"");
  EXPECT_EQ(tok_error(R"({"content": "a", "parse_special": 1})"), "parse_special: expected a boolean, got 1");
  EXPECT_TRUE(starts_with(tok_error("[]"), "the request body: expected a JSON object"));

  EXPECT_EQ(parse_detokenize_request(R"({"tokens": [0, 5, 9]})", 10), (std::vector<int32_t>{0, 5, 9}));
  EXPECT_TRUE(parse_detokenize_request(R"({"tokens": []})", 10).empty());
  auto detok_error = [](const std::string& body) -> std::string {
    try {
      parse_detokenize_request(body, 10);
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.what();
    }
    ADD_FAILURE() << body;
    return {};
  };
  EXPECT_EQ(detok_error(R"({"tokens": [1, 10]})"), "tokens[1]: expected a token id in [0, 9], got 10");
  EXPECT_EQ(detok_error(R"({"tokens": [-1]})"), "tokens[0]: expected a token id in [0, 9], got -1");
  EXPECT_EQ(detok_error(R"({"tokens": ["a"]})"), "tokens[0]: expected a token id in [0, 9], got \"a\"");
  EXPECT_EQ(detok_error(R"({"tokens": [2.5]})"), "tokens[0]: expected a token id in [0, 9], got 2.5");
  EXPECT_EQ(detok_error(R"({"tokens": 3})"), "tokens: expected an array of token ids, got 3");
  EXPECT_EQ(detok_error("{}"), "tokens: expected an array of token ids, got null");
}

}  // namespace
}  // namespace moetier::server

namespace moetier::server {
namespace {

TEST(OpenAIRequest, LogitBiasAndCachePrompt) {
  const CompletionRequest r = parse_chat_request(chat(R"("logit_bias": {"5": 100, "17": -100, "3": 0.5}, "cache_prompt": false)"), defaults());
  ASSERT_EQ(r.sampling.logit_bias.size(), 3u);
  std::vector<std::pair<int32_t, float>> got = r.sampling.logit_bias;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::pair<int32_t, float>>{{3, 0.5f}, {5, 100.0f}, {17, -100.0f}}));
  EXPECT_FALSE(r.cache_prompt);
  EXPECT_TRUE(parse_chat_request(chat(), defaults()).cache_prompt);
  EXPECT_TRUE(has(chat_error(chat(R"("logit_bias": [1, 2])")), "logit_bias: expected an object"));
  EXPECT_TRUE(has(chat_error(chat(R"("logit_bias": {"abc": 1})")), R"(logit_bias["abc"]: expected a token id)"));
  EXPECT_TRUE(has(chat_error(chat(R"("logit_bias": {"-3": 1})")), "expected a token id"));
  EXPECT_TRUE(has(chat_error(chat(R"("logit_bias": {"99999999999": 1})")), "expected a token id"));
  EXPECT_TRUE(has(chat_error(chat(R"("logit_bias": {"3": 101})")), R"(logit_bias["3"]: expected a number in [-100, 100])"));
  EXPECT_TRUE(has(chat_error(chat(R"("logit_bias": {"3": "x"})")), R"(logit_bias["3"])"));
  EXPECT_TRUE(has(chat_error(chat(R"("cache_prompt": 1)")), "cache_prompt: expected"));
}

}  // namespace
}  // namespace moetier::server
