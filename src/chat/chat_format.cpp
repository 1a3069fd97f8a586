#include "chat/chat_format.h"

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::chat {
namespace {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// Jinja's trim: whitespace off both ends.
std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\n\r") - b + 1);
}

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
    case Format::gemma: return "gemma";
    case Format::gemma4: return "gemma4";
  }
  return "?";
}

Format parse_format(std::string_view name) {
  for (Format f : {Format::chatml, Format::harmony, Format::mistral, Format::gemma, Format::gemma4})
    if (name == format_name(f)) return f;
  fail("--chat-format '{}' is not known; choose chatml, harmony, mistral, gemma or gemma4", name);
}

Format detect_format(const gguf::Metadata& md) {
  const std::string tmpl = md.get_string_or("tokenizer.chat_template", "");
  if (contains(tmpl, "<|im_start|>")) return Format::chatml;
  if (contains(tmpl, "<|channel|>") || contains(tmpl, "<|start|>")) return Format::harmony;
  if (contains(tmpl, "[INST]")) return Format::mistral;
  if (contains(tmpl, "<start_of_turn>")) return Format::gemma;
  if (contains(tmpl, "<|turn>")) return Format::gemma4;
  const std::string arch = md.get_string_or("general.architecture", "");
  if (arch.rfind("qwen", 0) == 0) return Format::chatml;
  if (arch == "gpt-oss") return Format::harmony;
  if (arch == "llama") return Format::mistral;
  if (arch == "gemma4") return Format::gemma4;
  if (arch.rfind("gemma", 0) == 0) return Format::gemma;
  fail("cannot tell the chat format of this model (architecture '{}', {}): pass --chat-format "
       "chatml|harmony|mistral|gemma|gemma4",
       arch, tmpl.empty() ? "no chat template" : "an unrecognised chat template");
}

bool template_opens_think(const gguf::Metadata& md) {
  const std::string tmpl = md.get_string_or("tokenizer.chat_template", "");
  // The generation prompt is the template's last part, from its last add_generation_prompt test. It opens the
  // block when it holds the literal '<think>\n' ending a string (the jinja source spells the newline as \n or as a
  // real one). Qwen3's has only '<think>\n\n</think>\n\n', its enable_thinking=false block, which this does not
  // match; its assistant history ('\n<think>\n' + reasoning) comes before.
  const size_t gen = tmpl.rfind("add_generation_prompt");
  if (gen == std::string::npos) return false;
  const std::string_view prompt = std::string_view(tmpl).substr(gen);
  return contains(prompt, "<think>\\n'") || contains(prompt, "<think>\n'");
}

std::string chatml_reply_opening(const Options& o) {
  if (o.no_think) return "<think>\n\n</think>\n\n";
  return o.think_opens ? "<think>\n" : "";
}

std::string gemma_turn(std::string_view role, std::string_view prefix, std::string_view content) {
  return fmt::format("<start_of_turn>{}\n{}{}<end_of_turn>\n", role, prefix, trim(content));
}

std::string gemma4_turn(std::string_view role, std::string_view content) {
  return fmt::format("<|turn>{}\n{}<turn|>\n", role, trim(content));
}

std::string render_user_turn(const Options& o, std::string_view msg, bool first, bool close_previous) {
  reasoning_effort_level(o.reasoning_effort);  // an unknown level is an error in every format, not only harmony
  std::string s;
  switch (o.format) {
    case Format::chatml:
      if (close_previous) s += "<|im_end|>\n";
      if (first && !o.system_prompt.empty()) s += fmt::format("<|im_start|>system\n{}<|im_end|>\n", o.system_prompt);
      s += fmt::format("<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n", msg);
      return s + chatml_reply_opening(o);
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
    case Format::gemma:
      if (close_previous) s += "<end_of_turn>\n";
      return s + gemma_turn("user", first && !o.system_prompt.empty() ? o.system_prompt + "\n\n" : "", msg) +
             "<start_of_turn>model\n";
    case Format::gemma4:
      if (close_previous) s += "<turn|>\n";
      if (first && !o.system_prompt.empty()) s += gemma4_turn("system", o.system_prompt);
      return s + gemma4_turn("user", msg) + std::string(kGemma4ReplyOpening);
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
    case Format::gemma:
      return {"<start_of_turn>", "<end_of_turn>"};
    case Format::gemma4:
      return {"<|turn>", "<turn|>", "<|channel>", "<channel|>"};
  }
  return {};
}

}  // namespace moetier::chat
