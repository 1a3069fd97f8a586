#include "chat/chat_format.h"

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::chat {
namespace {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

}  // namespace

std::string_view reasoning_effort_level(std::string_view effort) {
  for (std::string_view level : {"low", "medium", "high"})
    if (effort == level) return level;
  fail("reasoning effort '{}' is not known; choose low, medium or high", effort);
}

std::string harmony_system_message(std::string_view effort) {
  // gpt-oss's chat template (build_system_message) without its "Current date:" line, so a prompt does not
  // depend on the day it is rendered.
  return fmt::format(
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
      "2024-06\n\nReasoning: {}\n\n# Valid channels: analysis, commentary, final. Channel must be included for "
      "every message.<|end|>",
      reasoning_effort_level(effort));
}

std::string harmony_developer_message(std::string_view instructions) {
  if (instructions.empty()) return {};
  return fmt::format("<|start|>developer<|message|># Instructions\n\n{}\n\n<|end|>", instructions);
}

std::string_view format_name(Format f) {
  switch (f) {
    case Format::chatml: return "chatml";
    case Format::harmony: return "harmony";
    case Format::mistral: return "mistral";
  }
  return "?";
}

Format parse_format(std::string_view name) {
  for (Format f : {Format::chatml, Format::harmony, Format::mistral})
    if (name == format_name(f)) return f;
  fail("--chat-format '{}' is not known; choose chatml, harmony or mistral", name);
}

Format detect_format(const gguf::Metadata& md) {
  const std::string tmpl = md.get_string_or("tokenizer.chat_template", "");
  if (contains(tmpl, "<|im_start|>")) return Format::chatml;
  if (contains(tmpl, "<|channel|>") || contains(tmpl, "<|start|>")) return Format::harmony;
  if (contains(tmpl, "[INST]")) return Format::mistral;
  const std::string arch = md.get_string_or("general.architecture", "");
  if (arch.rfind("qwen", 0) == 0) return Format::chatml;
  if (arch == "gpt-oss") return Format::harmony;
  if (arch == "llama") return Format::mistral;
  fail("cannot tell the chat format of this model (architecture '{}', {}): pass --chat-format chatml|harmony|mistral",
       arch, tmpl.empty() ? "no chat template" : "an unrecognised chat template");
}

std::string render_user_turn(const Options& o, std::string_view msg, bool first, bool close_previous) {
  reasoning_effort_level(o.reasoning_effort);  // an unknown level is an error in every format, not only harmony
  std::string s;
  switch (o.format) {
    case Format::chatml:
      if (close_previous) s += "<|im_end|>\n";
      if (first && !o.system_prompt.empty()) s += fmt::format("<|im_start|>system\n{}<|im_end|>\n", o.system_prompt);
      s += fmt::format("<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n", msg);
      if (o.no_think) s += "<think>\n\n</think>\n\n";
      return s;
    case Format::harmony:
      if (close_previous) s += "<|end|>";
      if (first) s += harmony_system_message(o.reasoning_effort) + harmony_developer_message(o.system_prompt);
      s += fmt::format("<|start|>user<|message|>{}<|end|><|start|>assistant", msg);
      if (o.no_think) s += "<|channel|>final<|message|>";
      return s;
    case Format::mistral:
      if (close_previous) s += "</s>";
      if (first && !o.system_prompt.empty())
        s += fmt::format("[INST] {}\n\n{} [/INST]", o.system_prompt, msg);
      else
        s += fmt::format("[INST] {} [/INST]", msg);
      return s;
  }
  return s;
}

std::vector<std::string_view> control_markers(const Options& o) {
  switch (o.format) {
    case Format::chatml: {
      std::vector<std::string_view> m = {"<|im_start|>", "<|im_end|>"};
      if (o.no_think) m.insert(m.end(), {"<think>", "</think>"});
      return m;
    }
    case Format::harmony:
      return {"<|start|>", "<|message|>", "<|end|>", "<|channel|>"};
    case Format::mistral:
      return {"</s>"};
  }
  return {};
}

}  // namespace moetier::chat
