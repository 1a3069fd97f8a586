// libFuzzer entry for the OpenAI request bodies `moetier serve` parses (server/openai_request.h): any byte string
// given to parse_chat_request, parse_completion_request, parse_tokenize_request and parse_detokenize_request either
// parses or throws RequestError with status 400 and a message. What parses must be usable as it is: the sampling
// settings pass the Sampler's own checks, the stop strings are non-empty and at most 16, a chat has messages, a
// completion exactly one of prompt text and prompt ids, detokenized ids are in the vocabulary. Anything else (a
// crash, a sanitizer report, another exception type such as nlohmann's or moetier::Error, a hang, an allocation
// beyond -rss_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "sample/sampler.h"
#include "server/openai_request.h"
#include "util/error.h"

namespace {

using moetier::server::CompletionRequest;
using moetier::server::RequestError;

// A vocabulary size small enough that mutated seeds hold ids on both sides of it.
constexpr int64_t kVocab = 512;

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_openai_request: %s\n", what);
  std::abort();
}

void check_error(const RequestError& e) {
  check(e.status() == 400, "a request error other than 400");
  check(std::string_view(e.what()).size() > 0, "a request error without a message");
}

void check_request(const CompletionRequest& r, const moetier::server::RequestDefaults& defaults) {
  try {
    moetier::sample::Sampler s(r.sampling, 8);
  } catch (const moetier::Error&) {
    check(false, "accepted sampling settings the Sampler refuses");
  }
  check(r.stop.size() <= 16, "more than 16 stop strings");
  for (const auto& s : r.stop) check(!s.empty(), "an empty stop string");
  check(r.max_tokens >= 0 || r.max_tokens == defaults.max_tokens, "a negative max_tokens from the request");
  if (r.chat) {
    check(!r.messages.empty(), "a chat request without messages");
  } else {
    check(r.prompt.empty() != r.prompt_tokens.empty(), "a completion request without exactly one prompt form");
    for (const int32_t id : r.prompt_tokens) check(id >= 0, "a negative prompt token id");
  }
  check(r.reasoning_effort.empty() || r.reasoning_effort == "low" || r.reasoning_effort == "medium" ||
            r.reasoning_effort == "high",
        "an unknown reasoning_effort");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const moetier::server::RequestDefaults defaults;
  try {
    check_request(moetier::server::parse_chat_request(body, defaults), defaults);
  } catch (const RequestError& e) {
    check_error(e);
  }
  try {
    check_request(moetier::server::parse_completion_request(body, defaults), defaults);
  } catch (const RequestError& e) {
    check_error(e);
  }
  try {
    (void)moetier::server::parse_tokenize_request(body);
  } catch (const RequestError& e) {
    check_error(e);
  }
  try {
    for (const int32_t id : moetier::server::parse_detokenize_request(body, kVocab)) {
      check(id >= 0 && id < kVocab, "a detokenize id outside the vocabulary");
    }
  } catch (const RequestError& e) {
    check_error(e);
  }
  return 0;
}
