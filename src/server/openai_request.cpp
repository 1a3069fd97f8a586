#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace moetier::server {

namespace {

using nlohmann::json;

// Longest shown part of a wrong string value, bytes: enough to recognise it, short enough for one error line.
constexpr size_t kShownChars = 40;
// OpenAI's limit on stop sequences is 4; llama-server takes more. 16 keeps the per-token matching cheap.
constexpr size_t kMaxStops = 16;
// Longest stop string, bytes. The matcher looks for each stop's prefixes at the end of the text after every token,
// quadratic in the stop's length: the bound keeps a request from making each token cost megabytes of compares.
constexpr size_t kMaxStopBytes = 512;
// OpenAI accepts up to 300 logit_bias entries; more would only make each token's sampling slower.
constexpr size_t kMaxLogitBias = 300;

// A wrong value as the error shows it. Containers are named, not dumped: a deeply nested value would make the
// recursive dump() deep too, and a long one would flood the message.
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (s.size() <= kShownChars) return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
      // Cut on a character boundary so the shown prefix stays valid UTF-8 where the value was.
      size_t cut = kShownChars;
      while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
      return json(s.substr(0, cut)).dump(-1, ' ', false, json::error_handler_t::replace) +
             fmt::format("... ({} bytes)", s.size());
    }
    case json::value_t::array: return fmt::format("an array of {} items", v.size());
    case json::value_t::object: return "an object";
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "nothing";
    default: return v.dump();  // numbers: their JSON text
  }
}

[[noreturn]] void bad(std::string_view field, std::string_view expected, const json& got) {
  throw RequestError(400, fmt::format("{}: expected {}, got {}", field, expected, describe(got)));
}

[[noreturn]] void unsupported(std::string_view field, const json& got) {
  throw RequestError(400, fmt::format("{}: not supported by this server, got {}", field, describe(got)));
}

// Where the parser is, as a field path ("stop[1]", "messages[0].content"), so that an error raised while a value
// is still being read (a number too large for a double) can name its field like every other error does.
class FieldPath {
 public:
  bool event(json::parse_event_t e, const json& parsed) {
    switch (e) {
      case json::parse_event_t::object_start: frames_.push_back({false, {}, 0}); break;
      case json::parse_event_t::array_start: frames_.push_back({true, {}, 0}); break;
      case json::parse_event_t::key:
        if (!frames_.empty() && parsed.is_string()) frames_.back().key = parsed.get<std::string>();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        next();
        break;
      case json::parse_event_t::value: next(); break;
    }
    return true;
  }
  std::string str() const {
    std::string out;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.array) {
        out += fmt::format("[{}]", f.index);
      } else {
        if (!out.empty()) out += '.';
        out += f.key;
      }
    }
    return out.empty() ? "the request body" : out;
  }

 private:
  struct Frame {
    bool array;
    std::string key;  // objects: the member being read
    size_t index;     // arrays: the element being read
  };
  void next() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::vector<Frame> frames_;
};

json parse_body(std::string_view body) {
  FieldPath path;
  json j;
  try {
    j = json::parse(
        body.begin(), body.end(),
        [&path](int, json::parse_event_t e, json& parsed) { return path.event(e, parsed); });
  } catch (const json::out_of_range& e) {
    // 406: a number literal beyond the double range (1e999). Its text is quoted in the message.
    const std::string what = e.what();
    const size_t a = what.find('\'');
    const size_t b = what.rfind('\'');
    std::string token = a != std::string::npos && b > a ? what.substr(a + 1, b - a - 1) : "a huge number";
    if (token.size() > kShownChars) token = fmt::format("{}... ({} digits)", token.substr(0, kShownChars), token.size());
    throw RequestError(400, fmt::format("{}: expected a number within the double range, got {}", path.str(), token));
  } catch (const json::exception& e) {
    // parse_error: a syntax error or invalid UTF-8 in a string.
    throw RequestError(400, fmt::format("the request body: expected JSON, got text that is not: {}", e.what()));
  }
  if (!j.is_object()) bad("the request body", "a JSON object", j);
  return j;
}

// The member `key`, or nullptr when it is absent or null (OpenAI treats null as "not given").
const json* field(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const json& v, std::string_view name) {
  if (!v.is_boolean()) bad(name, "a boolean", v);
  return v.get<bool>();
}

const std::string& get_string(const json& v, std::string_view name) {
  if (!v.is_string()) bad(name, "a string", v);
  return v.get_ref<const std::string&>();
}

// A JSON number as a double (booleans are not numbers; JSON has no NaN, but a huge literal parses to infinity).
double get_double(const json& v, std::string_view name, std::string_view expected) {
  if (!v.is_number()) bad(name, expected, v);
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad(name, expected, v);
  return d;
}

// A whole number in [lo, hi]. 3.0 counts (JavaScript clients cannot tell it from 3); 3.5 does not.
int64_t get_int(const json& v, std::string_view name, int64_t lo, int64_t hi, std::string_view expected) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) bad(name, expected, v);
    const auto i = static_cast<int64_t>(u);
    if (i < lo) bad(name, expected, v);
    return i;
  }
  if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (i < lo || i > hi) bad(name, expected, v);
    return i;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is exact as a double; anything at or past it does not fit int64_t.
    if (!std::isfinite(d) || d != std::floor(d) || d < -0x1p63 || d >= 0x1p63) bad(name, expected, v);
    const auto i = static_cast<int64_t>(d);
    if (i < lo || i > hi) bad(name, expected, v);
    return i;
  }
  bad(name, expected, v);
}

// A float setting in a range; `lo_open`/`hi_open` exclude the ends.
float get_float(const json& v, std::string_view name, double lo, double hi, bool lo_open, bool hi_open) {
  const std::string expected = hi == std::numeric_limits<float>::max()
                                   ? fmt::format("a number {} {}", lo_open ? ">" : ">=", lo)
                                   : fmt::format("a number in {}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  const double d = get_double(v, name, expected);
  if (lo_open ? !(d > lo) : !(d >= lo)) bad(name, expected, v);
  if (hi_open ? !(d < hi) : !(d <= hi)) bad(name, expected, v);
  return static_cast<float>(d);
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

uint64_t get_seed(const json& v) {
  constexpr std::string_view expected = "an integer in [0, 2^64)";
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (i < 0) bad("seed", expected, v);
    return static_cast<uint64_t>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < 0 || d >= 0x1p64) bad("seed", expected, v);
    return static_cast<uint64_t>(d);
  }
  bad("seed", expected, v);
}

// The fields both endpoints share: sampling, length, stop, stream, model, n.
void parse_common(const json& j, const RequestDefaults& defaults, CompletionRequest& r) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  r.sampling = defaults.sampling;
  r.max_tokens = defaults.max_tokens;
  if (const json* v = field(j, "model")) r.model = get_string(*v, "model");
  if (const json* v = field(j, "stream")) r.stream = get_bool(*v, "stream");
  if (const json* v = field(j, "stream_options")) {
    if (!v->is_object()) bad("stream_options", "an object", *v);
    if (const json* u = field(*v, "include_usage")) r.include_usage = get_bool(*u, "stream_options.include_usage");
  }
  if (const json* v = field(j, "n")) {
    if (get_int(*v, "n", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), "an integer") != 1)
      throw RequestError(400, fmt::format("n: only 1 is supported, got {}", describe(*v)));
  }
  if (const json* v = field(j, "temperature")) r.sampling.temperature = get_float(*v, "temperature", 0, 2, false, false);
  if (const json* v = field(j, "top_p")) r.sampling.top_p = get_float(*v, "top_p", 0, 1, true, false);
  if (const json* v = field(j, "min_p")) r.sampling.min_p = get_float(*v, "min_p", 0, 1, false, true);
  if (const json* v = field(j, "top_k")) {
    r.sampling.top_k = static_cast<int32_t>(get_int(*v, "top_k", 0, kInt32Max, "an integer >= 0"));
  }
  if (const json* v = field(j, "repeat_penalty")) {
    r.sampling.repeat_penalty = get_float(*v, "repeat_penalty", 0, kFloatMax, true, false);
  }
  if (const json* v = field(j, "repeat_last_n")) {
    r.sampling.repeat_last_n = static_cast<int32_t>(get_int(*v, "repeat_last_n", 0, kInt32Max, "an integer >= 0"));
  }
  if (const json* v = field(j, "presence_penalty")) {
    r.sampling.presence_penalty = get_float(*v, "presence_penalty", -2, 2, false, false);
  }
  if (const json* v = field(j, "frequency_penalty")) {
    r.sampling.frequency_penalty = get_float(*v, "frequency_penalty", -2, 2, false, false);
  }
  if (const json* v = field(j, "logit_bias")) {
    // OpenAI's shape: {"token id": bias}; the ids are checked against the vocabulary by the sampler's owner.
    if (!v->is_object()) bad("logit_bias", "an object of token id -> bias", *v);
    if (v->size() > kMaxLogitBias) bad("logit_bias", fmt::format("at most {} tokens", kMaxLogitBias), *v);
    for (const auto& [key, bias] : v->items()) {
      const std::string name = fmt::format("logit_bias[\"{}\"]", key.substr(0, kShownChars));
      const bool digits = !key.empty() && key.size() <= 10 &&
                          std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || std::stoll(key) > kInt32Max) bad(name, "a token id (a whole number) as the key", json(key));
      r.sampling.logit_bias.emplace_back(static_cast<int32_t>(std::stoll(key)),
                                         get_float(bias, name, -100, 100, false, false));
    }
  }
  // llama-server's cache_prompt: false makes the request prefill its whole prompt even where the slot's KV cache
  // holds a common prefix (to measure what the reuse saves).
  if (const json* v = field(j, "cache_prompt")) r.cache_prompt = get_bool(*v, "cache_prompt");
  const json* seed = field(j, "seed");
  r.sampling.seed = seed != nullptr ? get_seed(*seed) : defaults.seed ? *defaults.seed : random_seed();

  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  // max_completion_tokens replaced max_tokens in the Chat Completions API; a client sending both means the new one.
  if (const json* v = field(j, "max_tokens")) r.max_tokens = get_int(*v, "max_tokens", 0, kInt64Max, "an integer >= 0");
  if (const json* v = field(j, "max_completion_tokens")) {
    r.max_tokens = get_int(*v, "max_completion_tokens", 0, kInt64Max, "an integer >= 0");
  }

  if (const json* v = field(j, "stop")) {
    if (v->is_string()) {
      const size_t n = v->get_ref<const std::string&>().size();
      if (n == 0 || n > kMaxStopBytes) bad("stop", fmt::format("a non-empty string of at most {} bytes", kMaxStopBytes), *v);
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > kMaxStops) bad("stop", fmt::format("at most {} strings", kMaxStops), *v);
      for (size_t i = 0; i < v->size(); ++i) {
        const json& s = (*v)[i];
        const std::string name = fmt::format("stop[{}]", i);
        if (!s.is_string() || s.get_ref<const std::string&>().empty() || s.get_ref<const std::string&>().size() > kMaxStopBytes)
          bad(name, fmt::format("a non-empty string of at most {} bytes", kMaxStopBytes), s);
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      bad("stop", "a string or an array of strings", *v);
    }
  }
}

std::string message_content(const json& m, const std::string& name, chat::Role role) {
  const json* c = field(m, "content");
  if (c == nullptr) {
    // An assistant turn that only called tools has no content; any other turn must say something.
    if (role == chat::Role::assistant) return {};
    bad(name + ".content", "a string or an array of text parts", m.contains("content") ? m["content"] : json());
  }
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) bad(name + ".content", "a string or an array of text parts", *c);
  // Text parts are joined as they are, as the chat templates that accept parts (Qwen's) do.
  std::string text;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& part = (*c)[i];
    const std::string pname = fmt::format("{}.content[{}]", name, i);
    if (!part.is_object()) bad(pname, "an object {\"type\": \"text\", \"text\": ...}", part);
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      bad(pname + ".type", "\"text\"", type == part.end() ? json() : *type);
    }
    if (*type != "text") {
      throw RequestError(400, fmt::format("{}.type: expected \"text\", got {} (only text parts are supported)", pname,
                                          describe(*type)));
    }
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) bad(pname + ".text", "a string", t == part.end() ? json() : *t);
    text += t->get_ref<const std::string&>();
  }
  return text;
}

}  // namespace

CompletionRequest parse_chat_request(std::string_view body, const RequestDefaults& defaults) {
  const json j = parse_body(body);
  CompletionRequest r;
  r.chat = true;
  parse_common(j, defaults, r);

  const json* msgs = field(j, "messages");
  if (msgs == nullptr || !msgs->is_array() || msgs->empty()) {
    bad("messages", "a non-empty array of messages", msgs == nullptr ? json() : *msgs);
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string name = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(name, "an object with role and content", m);
    const json* role_v = field(m, "role");
    if (role_v == nullptr) bad(name + ".role", "a string", m.contains("role") ? m["role"] : json());
    const std::string& role_name = get_string(*role_v, name + ".role");
    const std::optional<chat::Role> role = chat::parse_role(role_name);
    if (!role) bad(name + ".role", "one of \"system\", \"developer\", \"user\", \"assistant\"", *role_v);
    r.messages.push_back({*role, message_content(m, name, *role)});
  }

  if (const json* v = field(j, "chat_template_kwargs")) {
    if (!v->is_object()) bad("chat_template_kwargs", "an object", *v);
    if (const json* t = field(*v, "enable_thinking")) {
      r.enable_thinking = get_bool(*t, "chat_template_kwargs.enable_thinking");
    }
  }
  if (const json* v = field(j, "reasoning_effort")) {
    const std::string& e = get_string(*v, "reasoning_effort");
    if (e != "low" && e != "medium" && e != "high") bad("reasoning_effort", "one of \"low\", \"medium\", \"high\"", *v);
    r.reasoning_effort = e;
  }

  if (const json* v = field(j, "logprobs"); v != nullptr && get_bool(*v, "logprobs")) unsupported("logprobs", *v);
  if (const json* v = field(j, "top_logprobs")) {
    if (get_int(*v, "top_logprobs", 0, 20, "an integer in [0, 20]") != 0) unsupported("top_logprobs", *v);
  }
  if (const json* v = field(j, "tools")) {
    if (!v->is_array()) bad("tools", "an array", *v);
    if (!v->empty()) unsupported("tools", *v);
  }
  if (const json* v = field(j, "tool_choice"); v != nullptr && !(v->is_string() && *v == "none")) {
    unsupported("tool_choice", *v);
  }
  if (const json* v = field(j, "response_format")) {
    if (!v->is_object()) bad("response_format", "an object", *v);
    const auto type = v->find("type");
    if (type == v->end() || !type->is_string()) bad("response_format.type", "a string", type == v->end() ? json() : *type);
    if (*type != "text") {
      throw RequestError(400, fmt::format("response_format.type: not supported by this server (only \"text\"), got {}",
                                          describe(*type)));
    }
  }
  return r;
}

CompletionRequest parse_completion_request(std::string_view body, const RequestDefaults& defaults) {
  const json j = parse_body(body);
  CompletionRequest r;
  r.chat = false;
  parse_common(j, defaults, r);

  constexpr std::string_view kPromptShape = "a non-empty string, an array of one string, or an array of token ids";
  const json* p = field(j, "prompt");
  if (p == nullptr) bad("prompt", kPromptShape, json());
  // One prompt per request: a list of strings or of token lists would be a batch (one reply each), as is n > 1.
  const json* one = p;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) one = &(*p)[0];
  if (one->is_string()) {
    if (one->get_ref<const std::string&>().empty()) bad("prompt", kPromptShape, *one);
    r.prompt = one->get<std::string>();
  } else if (one->is_array() && !one->empty()) {
    r.prompt_tokens.reserve(one->size());
    for (size_t i = 0; i < one->size(); ++i) {
      const json& t = (*one)[i];
      if (!t.is_number()) bad("prompt", kPromptShape, *p);
      r.prompt_tokens.push_back(static_cast<int32_t>(
          get_int(t, fmt::format("prompt[{}]", i), 0, std::numeric_limits<int32_t>::max(), "a token id >= 0")));
    }
  } else {
    bad("prompt", kPromptShape, *p);
  }

  if (const json* v = field(j, "logprobs")) {
    if (get_int(*v, "logprobs", 0, 5, "an integer in [0, 5]") != 0) unsupported("logprobs", *v);
  }
  if (const json* v = field(j, "echo"); v != nullptr && get_bool(*v, "echo")) unsupported("echo", *v);
  if (const json* v = field(j, "best_of")) {
    if (get_int(*v, "best_of", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), "an integer") != 1)
      throw RequestError(400, fmt::format("best_of: only 1 is supported, got {}", describe(*v)));
  }
  if (const json* v = field(j, "suffix"); v != nullptr && !get_string(*v, "suffix").empty()) unsupported("suffix", *v);
  return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body) {
  const json j = parse_body(body);
  TokenizeRequest r;
  const json* c = field(j, "content");
  if (c == nullptr) bad("content", "a string", json());
  r.content = get_string(*c, "content");
  if (const json* v = field(j, "add_special")) r.add_special = get_bool(*v, "add_special");
  if (const json* v = field(j, "parse_special")) r.parse_special = get_bool(*v, "parse_special");
  return r;
}

std::vector<int32_t> parse_detokenize_request(std::string_view body, int64_t n_vocab) {
  const json j = parse_body(body);
  const json* t = field(j, "tokens");
  if (t == nullptr || !t->is_array()) bad("tokens", "an array of token ids", t == nullptr ? json() : *t);
  const int64_t hi = std::min<int64_t>(n_vocab - 1, std::numeric_limits<int32_t>::max());
  const std::string expected = fmt::format("a token id in [0, {}]", hi);
  std::vector<int32_t> ids;
  ids.reserve(t->size());
  for (size_t i = 0; i < t->size(); ++i) {
    ids.push_back(static_cast<int32_t>(get_int((*t)[i], fmt::format("tokens[{}]", i), 0, hi, expected)));
  }
  return ids;
}

}  // namespace moetier::server
