// `moetier serve` end to end: a real server process on 127.0.0.1 over a shared tiny model, talked to over HTTP.
// Greedy replies are compared with `moetier run --chat --temp 0` (the same engine, loaded the same way).
#include <signal.h>

#include <atomic>
#include <cctype>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "server/serve_process.h"

namespace moetier::test {
namespace {

using nlohmann::json;



json post(httplib::Client& c, const std::string& path, const json& body, int expect_status = 200) {
  auto res = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res) << path << ": no answer";
  if (!res) return {};
  EXPECT_EQ(res->status, expect_status) << path << ": " << res->body;
  return json::parse(res->body, nullptr, false);
}

// cache_prompt false: every request prefills its whole prompt, as `run` does. A reused prefix is not bit-identical
// to a fresh prefill (its rows and the prompt's last token were computed in batches of other sizes, whose sums
// round differently), so greedy text compared with `run` or with another request must not reuse one.
json chat_body(const std::string& msg, int max_tokens, bool stream = false) {
  return {{"model", "x"},
          {"messages", json::array({{{"role", "user"}, {"content", msg}}})},
          {"temperature", 0},
          {"max_tokens", max_tokens},
          {"stream", stream},
          {"cache_prompt", false}};
}

// The concatenated content (and reasoning) of a streamed chat reply, and its finish_reason.
struct Streamed {
  std::string content, reasoning, finish;
  bool done = false;
  int chunks = 0;
};
Streamed read_stream(const std::string& body) {
  Streamed s;
  for (const std::string& d : sse_data(body)) {
    if (d == "[DONE]") {
      s.done = true;
      continue;
    }
    const json j = json::parse(d);
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    const json& delta = c.contains("delta") ? c["delta"] : json::object();
    if (delta.contains("content") && delta["content"].is_string()) s.content += delta["content"].get<std::string>();
    if (c.contains("text")) s.content += c["text"].get<std::string>();
    if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string())
      s.reasoning += delta["reasoning_content"].get<std::string>();
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) s.finish = c["finish_reason"];
    ++s.chunks;
  }
  return s;
}

TEST(Serve, HealthModelsTokenizeAndGreedyChatEqualsRun) {
  ServeProcess srv("greedy", tiny_qwen(), {"-c", "256"});
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  const json models = json::parse(c->Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "tiny-qwen3moe-Q4_K_M.gguf");

  const json tk = post(*c, "/tokenize", {{"content", "Once upon a time"}});
  ASSERT_TRUE(tk["tokens"].is_array());
  EXPECT_FALSE(tk["tokens"].empty());
  const json dt = post(*c, "/detokenize", {{"tokens", tk["tokens"]}});
  EXPECT_EQ(dt["content"], "Once upon a time");

  const std::string msg = "Once upon a time there was a";
  const std::string expected = run_text("run -m " + tiny_qwen().string() + " -c 256 -t 2 --chat --temp 0 -n 24 -p '" + msg + "'");
  const json r = post(*c, "/v1/chat/completions", chat_body(msg, 24));
  ASSERT_TRUE(r.contains("choices")) << r.dump();
  const std::string got = r["choices"][0]["message"].value("reasoning_content", "") +
                          r["choices"][0]["message"]["content"].get<std::string>();
  EXPECT_EQ(got, expected);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(r["usage"]["completion_tokens"].get<int>() <= 24, true);

  // Streamed: the same text in deltas, then the finish chunk and [DONE].
  auto sres = c->Post("/v1/chat/completions", chat_body(msg, 24, true).dump(), "application/json");
  ASSERT_TRUE(sres);
  EXPECT_EQ(sres->status, 200);
  EXPECT_NE(sres->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const Streamed s = read_stream(sres->body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reasoning + s.content, expected);
  EXPECT_EQ(s.finish, r["choices"][0]["finish_reason"]);
  EXPECT_EQ(srv.stop(SIGINT), 130) << srv.log();
  EXPECT_NE(srv.log().find("stopping (SIGINT)"), std::string::npos);
}

TEST(Serve, CompletionsLengthStopAndPrefixReuse) {
  ServeProcess srv("completions", tiny_qwen(), {"-c", "256"});
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  const json body = {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 12}, {"cache_prompt", false}};
  const json a = post(*c, "/v1/completions", body);
  ASSERT_TRUE(a.contains("choices")) << a.dump();
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a["usage"]["completion_tokens"], 12);
  const std::string text = a["choices"][0]["text"];
  const std::string expected = run_text("run -m " + tiny_qwen().string() + " -c 256 -t 2 --temp 0 -n 12 -p 'Once upon a time'");
  EXPECT_EQ("Once upon a time" + text, expected);

  // The same prompt again (cache_prompt false, llama-server's field): the whole prompt is run again, same text.
  const json b2 = post(*c, "/v1/completions", body);
  EXPECT_EQ(b2["choices"][0]["text"], text);
  EXPECT_EQ(b2["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // With the default (cache_prompt true), every prompt token but the last is kept from the slot's KV cache.
  json reuse = body;
  reuse.erase("cache_prompt");
  const json b = post(*c, "/v1/completions", reuse);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            b["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(b["usage"]["completion_tokens"], 12);

  // A stop string cut from the text: the reply ends before it and never shows any of it.
  // Two ASCII letters from inside the reply (the tiny model's text is random bytes and letters).
  size_t at = 1;
  while (at + 1 < text.size() && !(std::isalpha(static_cast<unsigned char>(text[at])) &&
                                   std::isalpha(static_cast<unsigned char>(text[at + 1]))))
    ++at;
  ASSERT_LT(at + 1, text.size()) << "no two ASCII letters in " << text;
  const std::string stop = text.substr(at, 2);
  json sb = body;
  sb["stop"] = stop;
  const json st = post(*c, "/v1/completions", sb);
  EXPECT_EQ(st["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(st["choices"][0]["text"], text.substr(0, text.find(stop)));
  sb["stream"] = true;
  auto ss = c->Post("/v1/completions", sb.dump(), "application/json");
  ASSERT_TRUE(ss);
  const Streamed sst = read_stream(ss->body);
  EXPECT_EQ(sst.content, text.substr(0, text.find(stop)));
  EXPECT_EQ(sst.finish, "stop");

  // The monitor's JSON and /metrics count what was served.
  const json stats = json::parse(c->Get("/v1/moetier/stats")->body);
  EXPECT_FALSE(stats.empty());
  auto m = c->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("moetier_prompt_tokens_reused_total"), std::string::npos);
  EXPECT_EQ(srv.stop(SIGTERM), 143);
}

// A chat's second turn keeps the first turn's prompt in the slot's KV cache: it is not prefilled again.
TEST(Serve, ChatHistoryIsReused) {
  ServeProcess srv("history", tiny_qwen(), {"-c", "512"});
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  json turn = {{"messages", json::array({{{"role", "system"}, {"content", "Tell a story."}},
                                         {{"role", "user"}, {"content", "Once upon a time there was a dog"}}})},
               {"temperature", 0},
               {"max_tokens", 8}};
  const json r1 = post(*c, "/v1/chat/completions", turn);
  EXPECT_EQ(r1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  turn["messages"].push_back({{"role", "assistant"}, {"content", r1["choices"][0]["message"]["content"]}});
  turn["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
  const json r2 = post(*c, "/v1/chat/completions", turn);
  // At least the whole first prompt (it ends with the assistant's opening, which the history repeats).
  EXPECT_GE(r2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), r1["usage"]["prompt_tokens"].get<int>())
      << r2.dump();
  EXPECT_NE(srv.log().find("reused from the slot's KV cache"), std::string::npos);
  auto m = c->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("moetier_prompt_tokens_reused_total " +
                         std::to_string(r2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>())),
            std::string::npos)
      << m->body;
}

TEST(Serve, BadRequestsAreClientErrors) {
  ServeProcess srv("bad", tiny_qwen(), {"-c", "64", "--api-key", "sekrit"});
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  EXPECT_EQ(c->Get("/health")->status, 200);  // no key needed
  auto nokey = c->Post("/v1/chat/completions", chat_body("hi", 4).dump(), "application/json");
  ASSERT_TRUE(nokey);
  EXPECT_EQ(nokey->status, 401);
  c->set_bearer_token_auth("wrong");
  EXPECT_EQ(c->Post("/v1/chat/completions", chat_body("hi", 4).dump(), "application/json")->status, 401);
  c->set_bearer_token_auth("sekrit");
  const auto err = [&](const std::string& path, const std::string& body, int status) {
    auto r = c->Post(path, body, "application/json");
    EXPECT_TRUE(r) << body;
    if (!r) return std::string();
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    const json j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.contains("error") && j["error"]["message"].is_string()) << r->body;
    return j.contains("error") ? j["error"]["message"].get<std::string>() : std::string();
  };
  err("/v1/chat/completions", "{not json", 400);
  err("/v1/chat/completions", R"({"messages": "hi"})", 400);
  err("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})", 400);
  err("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "n": 2})", 400);
  err("/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400);
  err("/v1/completions", R"({"prompt": [1, 2, 99999999]})", 400);
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "once upon a time ";
  const std::string m = err("/v1/completions", json{{"prompt", long_prompt}}.dump(), 400);
  EXPECT_NE(m.find("context of 64 tokens"), std::string::npos) << m;
  err("/v1/nothing", "{}", 404);
  auto get_post_only = c->Get("/v1/chat/completions");
  ASSERT_TRUE(get_post_only);
  EXPECT_EQ(get_post_only->status, 405);
  // curl -d sends application/x-www-form-urlencoded: the body is still JSON to the API, whatever its size.
  const std::string form_body = json{{"prompt", long_prompt + long_prompt + long_prompt}}.dump();
  ASSERT_GT(form_body.size(), 8192u);
  auto form = c->Post("/v1/completions", form_body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 400) << form->body;
  EXPECT_NE(form->body.find("context of 64 tokens"), std::string::npos) << form->body;
  // A browser's CORS preflight needs no key, and replies allow other origins.
  httplib::Client open("127.0.0.1", srv.port());
  auto pre = open.Options("/v1/chat/completions");
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
  // The server is still healthy and answers a good request.
  const json ok = post(*c, "/v1/chat/completions", chat_body("hi", 3));
  EXPECT_EQ(ok["usage"]["completion_tokens"].get<int>() <= 3, true);
}

// Two clients at once: with one slot the second waits, with two they run together; each gets its own answer,
// the one it gets alone.
void concurrent_clients(int parallel) {
  ServeProcess srv("parallel" + std::to_string(parallel), tiny_qwen(), {"-c", "256", "--parallel", std::to_string(parallel)});
  ASSERT_TRUE(srv.ok());
  const std::vector<std::string> msgs = {"Once upon a time", "The little dog"};
  std::vector<std::string> alone;
  {
    auto c = srv.client();
    for (const auto& m : msgs) alone.push_back(post(*c, "/v1/chat/completions", chat_body(m, 20))["choices"][0]["message"]["content"]);
  }
  // A fresh server, so that neither answer below reuses a cached prefix from the ones above.
  ServeProcess srv2("parallel" + std::to_string(parallel) + "b", tiny_qwen(),
                    {"-c", "256", "--parallel", std::to_string(parallel)});
  ASSERT_TRUE(srv2.ok());
  std::vector<std::string> got(msgs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < msgs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto c = srv2.client();
      auto r = c->Post("/v1/chat/completions", chat_body(msgs[i], 20, i == 1).dump(), "application/json");
      if (!r) return;
      got[i] = i == 1 ? read_stream(r->body).content
                      : json::parse(r->body)["choices"][0]["message"]["content"].get<std::string>();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, alone);
  const json stats = json::parse(srv2.client()->Get("/v1/moetier/stats")->body);
  EXPECT_FALSE(stats.empty());
}

TEST(Serve, TwoClientsOneSlot) { concurrent_clients(1); }
TEST(Serve, TwoClientsTwoSlots) { concurrent_clients(2); }

// The tiny model's end-of-text token, to ban with logit_bias where a reply must run long.
int32_t eos_id() {
  const auto file = gguf::GgufModel::open(tiny_qwen());
  return tokenizer::Tokenizer::from_metadata(file.metadata()).eos();
}

json stats_of(const ServeProcess& srv) { return json::parse(srv.client()->Get("/v1/moetier/stats")->body); }

int count_finished(const json& stats, const std::string& reason) {
  int n = 0;
  for (const auto& r : stats["requests"]) n += r.value("finish_reason", "") == reason ? 1 : 0;
  return n;
}

// A client that leaves cancels only its own request: queued (behind a long one on the only slot) or running.
TEST(Serve, DisconnectCancelsOnlyThatRequest) {
  // 2000 tokens with end-of-text banned: about a second here, the time the two queued clients have to leave.
  const json long_body = {{"prompt", "Once upon a time"},
                          {"temperature", 0},
                          {"max_tokens", 2000},
                          {"logit_bias", {{std::to_string(eos_id()), -100}}}};
  std::string expected;
  {
    ServeProcess ref("disconnect-ref", tiny_qwen(), {"-c", "2100"});
    ASSERT_TRUE(ref.ok());
    expected = post(*ref.client(), "/v1/completions", long_body)["choices"][0]["text"];
  }
  ServeProcess srv("disconnect", tiny_qwen(), {"-c", "2100", "--parallel", "1"});
  ASSERT_TRUE(srv.ok());
  std::string long_reply;
  std::thread runner([&] {
    auto c = srv.client();
    auto r = c->Post("/v1/completions", long_body.dump(), "application/json");
    if (r) long_reply = r->body;
  });
  for (int i = 0; i < 500 && stats_of(srv)["server"]["active"] != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {
    // Queued behind the long one: leaves at its first bytes (the role chunk).
    auto c = srv.client();
    (void)post_receiving(*c, "/v1/chat/completions", chat_body("The little dog", 50, true).dump(),
                         [&](const char*, size_t) { return false; });
  }
  {
    // Queued too, a completion (no role chunk): its client leaves at the first keep-alive comment.
    auto c = srv.client();
    std::string seen;
    (void)post_receiving(*c, "/v1/completions", json{{"prompt", "A cat"}, {"max_tokens", 50}, {"stream", true}}.dump(),
                         [&](const char* d, size_t n) {
                           seen.append(d, n);
                           return seen.find(": keep-alive") == std::string::npos;
                         });
  }
  // Both are dropped while the long one still runs (each within two keep-alive periods of leaving).
  json st;
  for (int i = 0; i < 400; ++i) {
    st = stats_of(srv);
    if (count_finished(st, "cancelled") == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(count_finished(st, "cancelled"), 2) << st.dump();
  EXPECT_EQ(st["server"]["active"], 1) << "the long request should still be running: " << st.dump();
  runner.join();
  const json a = json::parse(long_reply, nullptr, false);
  ASSERT_TRUE(a.contains("choices")) << long_reply;
  EXPECT_EQ(a["usage"]["completion_tokens"], 2000);
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a["choices"][0]["text"], expected);  // the whole reply, as it is alone
  // A running stream that leaves mid-reply: its request ends, the server goes on serving.
  {
    auto c = srv.client();
    int chunks = 0;
    (void)post_receiving(*c, "/v1/completions",
                         json{{"prompt", "The little dog"}, {"max_tokens", 1500}, {"stream", true},
                              {"logit_bias", {{std::to_string(eos_id()), -100}}}}
                             .dump(),
                         [&](const char*, size_t) { return ++chunks < 3; });
  }
  const json after = post(*srv.client(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}});
  EXPECT_EQ(after["usage"]["completion_tokens"], 2);
  st = stats_of(srv);
  EXPECT_EQ(count_finished(st, "cancelled"), 3) << st["requests"].dump();
}

// A non-streamed request whose client leaves (closes the connection, as an SDK's timeout does) is cancelled while it
// runs, as a stream's is: the keep-alive bytes the server writes between tokens find the closed connection.
TEST(Serve, NonStreamedDisconnectCancelsTheRunningRequest) {
  ServeProcess srv("disconnect-nonstream", tiny_qwen(), {"-c", "4096"});
  ASSERT_TRUE(srv.ok());
  {
    auto c = srv.client();
    (void)post_receiving(
        *c, "/v1/completions",
        json{{"prompt", "Once"}, {"max_tokens", 4000}, {"logit_bias", {{std::to_string(eos_id()), -100}}}}.dump(),
        [](const char*, size_t) { return false; });
  }
  json st = stats_of(srv);
  for (int i = 0; i < 400 && count_finished(st, "cancelled") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    st = stats_of(srv);
  }
  ASSERT_EQ(count_finished(st, "cancelled"), 1) << st.dump();
  EXPECT_LT(st["requests"][0]["completion_tokens"].get<int>(), 4000);
}

// What `serve` refuses at start: a model it cannot open (the error, at once, not a server that hangs), a port in
// use (not a second server sharing it).
TEST(Serve, StartupErrorsEndTheProcess) {
  const auto run = [](const std::string& args) { return run_shell("timeout 60 " + cli_path() + " " + args + " 2>&1"); };
  const CliResult missing = run("serve -m /nonexistent/model.gguf --port 0");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;  // 124 would be the timeout: a hang
  EXPECT_NE(missing.output.find("/nonexistent/model.gguf"), std::string::npos) << missing.output;
  ServeProcess srv("port-in-use", tiny_qwen(), {"-c", "64"});
  ASSERT_TRUE(srv.ok());
  const CliResult taken = run("serve -m " + tiny_qwen().string() + " --port " + std::to_string(srv.port()));
  EXPECT_EQ(taken.exit_code, 1) << taken.output;
  EXPECT_NE(taken.output.find("cannot listen on 127.0.0.1:" + std::to_string(srv.port())), std::string::npos)
      << taken.output;
  const CliResult bad_host = run("serve -m " + tiny_qwen().string() + " --host 300.1.2.3 --port 0");
  EXPECT_EQ(bad_host.exit_code, 1) << bad_host.output;
  EXPECT_NE(bad_host.output.find("--host 300.1.2.3"), std::string::npos) << bad_host.output;
}

// --seed N: requests that send no seed all use it, so the same request samples the same text.
TEST(Serve, ServerSeedIsTheDefaultOfRequests) {
  ServeProcess srv("seed", tiny_qwen(), {"-c", "256", "--seed", "42", "--temp", "1.5"});
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"cache_prompt", false}};
  const json a = post(*c, "/v1/completions", body);
  const json b = post(*c, "/v1/completions", body);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  json other = body;
  other["seed"] = 7;
  const json d = post(*c, "/v1/completions", other);
  EXPECT_TRUE(d["choices"][0]["text"].is_string());
}

// SIGINT with a stream in flight: the stream ends with an error event, the server exits 130 after its summary.
TEST(Serve, ShutdownEndsInFlightStreams) {
  ServeProcess srv("shutdown", tiny_qwen(), {"-c", "4096"});
  ASSERT_TRUE(srv.ok());
  std::string body;
  std::atomic<bool> got_bytes{false};
  std::thread client([&] {
    auto c = srv.client();
    (void)post_receiving(*c, "/v1/completions",
                         json{{"prompt", "Once"}, {"max_tokens", 4000}, {"stream", true},
                              {"logit_bias", {{std::to_string(eos_id()), -100}}}}
                             .dump(),
                         [&](const char* d, size_t n) {
                    body.append(d, n);
                    got_bytes = true;
                    return true;
                  });
  });
  for (int i = 0; i < 200 && !got_bytes; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(srv.stop(SIGINT), 130) << srv.log();
  client.join();
  EXPECT_NE(body.find("shutting down"), std::string::npos) << body.substr(0, 400);
  EXPECT_NE(srv.log().find("prefill:"), std::string::npos) << srv.log();
}

}  // namespace
}  // namespace moetier::test
