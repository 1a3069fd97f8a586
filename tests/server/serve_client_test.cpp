// `moetier serve` with real clients: the official `openai` npm package (installed, pinned, into the test's scratch
// folder from the npm registry) and the monitor page in headless Chromium (scripts/monitor_check.sh).
#include <cstdlib>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "server/serve_process.h"

namespace moetier::test {
namespace {

using nlohmann::json;

// The SDK version the test is written against: v6 is the last line that runs on Debian 12's Node 20 (v7 needs 22).
constexpr const char* kOpenaiPackage = "openai@6.30.1";

std::filesystem::path source_dir() { return MOETIER_SOURCE_DIR; }



TEST(ServeClients, OpenaiSdkStreamedAndNot) {
  const std::filesystem::path npm_dir = tmp_dir("openai-npm");
  if (!std::filesystem::exists(npm_dir / "node_modules/openai/package.json")) {
    const CliResult npm = run_shell("npm install --prefix " + npm_dir.string() + " " + kOpenaiPackage +
                                    " --no-audit --no-fund --loglevel=error 2>&1");
    ASSERT_EQ(npm.exit_code, 0) << "npm install " << kOpenaiPackage << " failed:\n" << npm.output;
  }
  ServeProcess srv("openai-sdk", tiny_qwen(), {"-c", "256", "--api-key", "sekrit"});
  ASSERT_TRUE(srv.ok());
  const std::string msg = "Once upon a time there was a";
  const std::string script = (source_dir() / "tests/server/openai_client.cjs").string();
  const CliResult node = run_shell("NODE_PATH=" + (npm_dir / "node_modules").string() + " node " + script + " " +
                                   srv.base_url() + " '" + msg + "' 16 2>&1");
  const std::string& out = node.output;
  ASSERT_EQ(node.exit_code, 0) << out;
  const json j = json::parse(out.substr(out.rfind('{', out.find("\"chat\"")) ), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  const std::string expected_chat =
      run_text("run -m " + tiny_qwen().string() + " -c 256 -t 2 --chat --temp 0 -n 16 -p '" + msg + "'");
  EXPECT_EQ(j["chat"]["content"], expected_chat);
  EXPECT_EQ(j["chat"]["object"], "chat.completion");
  EXPECT_EQ(j["chat_stream"]["content"], expected_chat);
  EXPECT_EQ(j["chat_stream"]["role"], "assistant");
  EXPECT_EQ(j["chat_stream"]["finish"], j["chat"]["finish"]);
  EXPECT_EQ(j["chat_stream"]["usage"]["completion_tokens"], j["chat"]["usage"]["completion_tokens"]);
  EXPECT_EQ(j["chat"]["usage"]["total_tokens"].get<int>(),
            j["chat"]["usage"]["prompt_tokens"].get<int>() + j["chat"]["usage"]["completion_tokens"].get<int>());
  const std::string expected_text = run_text("run -m " + tiny_qwen().string() + " -c 256 -t 2 --temp 0 -n 16 -p '" + msg + "'");
  EXPECT_EQ(msg + j["completion"]["text"].get<std::string>(), expected_text);
  EXPECT_EQ(j["completion_stream"]["text"], j["completion"]["text"]);
  EXPECT_EQ(j["models"][0], "tiny-qwen3moe-Q4_K_M.gguf");
  EXPECT_EQ(j["bad"]["status"], 400);
  EXPECT_EQ(j["bad"]["isApiError"], true);
  EXPECT_NE(j["bad"]["message"].get<std::string>().find("temperature"), std::string::npos);
  EXPECT_EQ(j["wrong_key"]["status"], 401);
}

TEST(ServeClients, MonitorPageShowsLiveNumbersInChromium) {
  // Experts streamed through a small RAM cache, so the page has a hit rate and reads to show.
  ServeProcess srv("monitor", tiny_qwen(), {"-c", "256", "--experts", "stream", "--cache-mb", "2"});
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  auto r = c->Post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 24}}.dump(),
                   "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::filesystem::path out = tmp_dir("monitor");
  std::filesystem::remove(out / "monitor.png");
  const CliResult check =
      run_shell("bash " + (source_dir() / "scripts/monitor_check.sh").string() + " " + srv.base_url() + "/ " +
                out.string() + " 2>&1");
  const std::string& log = check.output;
  EXPECT_EQ(check.exit_code, 0) << log;
  ASSERT_TRUE(std::filesystem::exists(out / "monitor.png")) << log;
  // The DOM after the page polled: the numbers of this run, read from the server's own stats.
  const std::string dom = read_file(out / "monitor.dom.html");
  const auto value = [&](const std::string& id) {
    std::smatch m;
    const std::regex re("id=\"" + id + "\"[^>]*data-value=\"([^\"]*)\"");
    return std::regex_search(dom, m, re) ? std::stod(m[1]) : -1.0;
  };
  EXPECT_GT(value("tps-decode"), 0.0) << dom;
  EXPECT_GT(value("hit-rate"), 0.0);   // 14 slots for 64 experts: some hits, many misses
  EXPECT_LT(value("hit-rate"), 1.0);
  EXPECT_GT(value("mib-per-token"), 0.0);
  EXPECT_EQ(value("requests-total"), 1.0);
  EXPECT_EQ(value("queue-depth"), 0.0);
  // A PNG of the page, not an error page: the signature and a size a rendered 1280x900 page has.
  const std::string png = read_file(out / "monitor.png");
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_GT(png.size(), 20000u);
}

}  // namespace
}  // namespace moetier::test
