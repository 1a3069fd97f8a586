// Reasoning through the server on models with real special tokens: tiny synthetic models (random weights) carrying
// Qwen3's vocabulary (ChatML, <think>) and gpt-oss's o200k_harmony vocabulary (harmony channels), both with their
// chat templates. The weights are random, so the replies are steered with OpenAI's logit_bias (a +100 bias makes
// one token win every step), which is enough to make the model open a thought and be cut in it, answer bare text
// with no channel markup, or emit a header that never completes.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "server/serve_process.h"

namespace moetier::test {
namespace {

using nlohmann::json;

// moetier synth --preset tiny with the vocabulary of ../shared/tokenizer/<vocab>.gguf, once per test process.
std::filesystem::path synth_with_vocab(const std::string& vocab) {
  const std::filesystem::path dest = tmp_dir("serve-models") / ("tiny-" + vocab + ".gguf");
  if (std::filesystem::exists(dest)) return dest;
  const std::filesystem::path part = dest.string() + ".part" + std::to_string(getpid());
  const CliResult r = run_cli("synth --preset tiny -q --vocab " + (shared_dir() / "tokenizer" / (vocab + ".gguf")).string() +
                              " -o " + part.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  publish_once(part, dest);
  return dest;
}

int32_t token_id(httplib::Client& c, const std::string& text) {
  auto r = c.Post("/tokenize", json{{"content", text}}.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200);
  const json t = json::parse(r->body)["tokens"];
  EXPECT_EQ(t.size(), 1u) << text << " is not one token: " << t.dump();
  return t.empty() ? -1 : t[0].get<int32_t>();
}

struct Reply {
  int status = 0;
  bool has_reasoning = false;
  std::string reasoning, content, finish;
};

// The same request non-streamed and streamed: both must give the same reply (checked here), which is returned.
Reply chat(httplib::Client& c, json body) {
  Reply whole;
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return whole;
  whole.status = r->status;
  if (r->status != 200) return whole;
  const json j = json::parse(r->body);
  const json& m = j["choices"][0]["message"];
  whole.has_reasoning = m.contains("reasoning_content");
  whole.reasoning = m.value("reasoning_content", "");
  whole.content = m.value("content", "");
  whole.finish = j["choices"][0]["finish_reason"];
  body["stream"] = true;
  auto s = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(s && s->status == 200);
  if (!s) return whole;
  Reply streamed;
  for (const std::string& d : sse_data(s->body)) {
    if (d == "[DONE]") continue;
    const json ch = json::parse(d);
    EXPECT_FALSE(ch.contains("error")) << d;
    if (ch["choices"].empty()) continue;
    const json& delta = ch["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      streamed.has_reasoning = true;
      streamed.reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("content") && delta["content"].is_string()) streamed.content += delta["content"].get<std::string>();
    if (ch["choices"][0]["finish_reason"].is_string()) streamed.finish = ch["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(streamed.reasoning, whole.reasoning);
  EXPECT_EQ(streamed.content, whole.content);
  EXPECT_EQ(streamed.finish, whole.finish);
  return whole;
}

json request(const std::string& user, int max_tokens, int32_t forced) {
  return {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", user}}})},
          {"temperature", 0},
          {"max_tokens", max_tokens},
          {"logit_bias", {{std::to_string(forced), 100}}}};
}

TEST(ServeReasoning, QwenThinkBlock) {
  ServeProcess srv("qwen3-think", synth_with_vocab("qwen3-vocab"), {"-c", "512"});
  ASSERT_TRUE(srv.ok());
  EXPECT_NE(srv.log().find("chat format: chatml"), std::string::npos) << srv.log();
  auto c = srv.client();
  const int32_t think = token_id(*c, "<think>");
  const int32_t hello = token_id(*c, " Hello");

  // The reply opens a thought and max_tokens cuts it: what was thought is reasoning, there is no answer.
  const Reply cut = chat(*c, request("hi", 3, think));
  EXPECT_EQ(cut.status, 200);
  EXPECT_TRUE(cut.has_reasoning);
  EXPECT_EQ(cut.reasoning, "<think><think>");  // the first <think> opened it; the next two are its text
  EXPECT_EQ(cut.content, "");
  EXPECT_EQ(cut.finish, "length");

  // A reply without a think block is all answer.
  const Reply plain = chat(*c, request("hi", 3, hello));
  EXPECT_FALSE(plain.has_reasoning);
  EXPECT_EQ(plain.content, " Hello Hello Hello");

  // enable_thinking false: the prompt carries Qwen's empty think block, so even a <think> token is answer text.
  json off = request("hi", 2, think);
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  const Reply no_think = chat(*c, off);
  EXPECT_FALSE(no_think.has_reasoning);
  EXPECT_EQ(no_think.content, "<think><think>");
  // The empty think block is in the prompt: 4 more tokens (<think>, "\n\n", </think>, "\n\n").
  auto u1 = json::parse(c->Post("/v1/chat/completions", request("hi", 1, hello).dump(), "application/json")->body);
  json off1 = request("hi", 1, hello);
  off1["chat_template_kwargs"] = {{"enable_thinking", false}};
  auto u2 = json::parse(c->Post("/v1/chat/completions", off1.dump(), "application/json")->body);
  EXPECT_EQ(u2["usage"]["prompt_tokens"].get<int>() - u1["usage"]["prompt_tokens"].get<int>(), 4);
}

TEST(ServeReasoning, HarmonyBareFinalAndMalformedHeader) {
  ServeProcess srv("harmony", synth_with_vocab("gptoss-vocab"), {"-c", "512"});
  ASSERT_TRUE(srv.ok());
  EXPECT_NE(srv.log().find("chat format: harmony"), std::string::npos) << srv.log();
  auto c = srv.client();
  const int32_t channel = token_id(*c, "<|channel|>");
  const int32_t hello = token_id(*c, " Hello");

  // A bare final message (no channel markup at all) is the answer.
  const Reply bare = chat(*c, request("hi", 3, hello));
  EXPECT_EQ(bare.status, 200);
  EXPECT_FALSE(bare.has_reasoning);
  EXPECT_EQ(bare.content, " Hello Hello Hello");

  // Headers that never complete (<|channel|> after <|channel|>, no <|message|>): a 200 with nothing shown, never a
  // server error, and the header text is not leaked into the answer.
  const Reply broken = chat(*c, request("hi", 4, channel));
  EXPECT_EQ(broken.status, 200);
  EXPECT_EQ(broken.content.find("<|channel|>"), std::string::npos) << broken.content;
  EXPECT_FALSE(broken.has_reasoning);
  EXPECT_EQ(broken.finish, "length");

  // reasoning_effort is honoured (it is part of the system message) and checked.
  json low = request("hi", 1, hello);
  low["reasoning_effort"] = "low";
  EXPECT_EQ(chat(*c, low).status, 200);
  json bad = request("hi", 1, hello);
  bad["reasoning_effort"] = "extreme";
  auto r = c->Post("/v1/chat/completions", bad.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("reasoning_effort"), std::string::npos) << r->body;

  // enable_thinking false opens the final channel in the prompt: the reply is answer text from its first token.
  json fin = request("hi", 2, hello);
  fin["chat_template_kwargs"] = {{"enable_thinking", false}};
  const Reply final_only = chat(*c, fin);
  EXPECT_FALSE(final_only.has_reasoning);
  EXPECT_EQ(final_only.content, " Hello Hello");
}

}  // namespace
}  // namespace moetier::test
