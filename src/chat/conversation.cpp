#include "chat/conversation.h"

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::chat {
namespace {

// The system slot: opts.system_prompt, then every system and developer message in order, one paragraph each.
std::string merged_system(const Options& o, std::span<const Message> messages) {
  std::string s = o.system_prompt;
  for (const Message& m : messages) {
    if (m.role != Role::system && m.role != Role::developer) continue;
    if (!s.empty() && !m.content.empty()) s += "\n\n";
    s += m.content;
  }
  return s;
}

// Qwen3's template keeps only the answer of an earlier assistant turn: the text after the last </think>, its
// leading newlines dropped (content.split('</think>')[-1].lstrip('\n')).
std::string_view without_think(std::string_view content) {
  const size_t end = content.rfind("</think>");
  if (end == std::string_view::npos) return content;
  std::string_view rest = content.substr(end + 8);
  while (!rest.empty() && rest.front() == '\n') rest.remove_prefix(1);
  return rest;
}

std::string render_chatml(const Options& o, std::string_view system, std::span<const Message> messages) {
  std::string s;
  if (!system.empty()) s += fmt::format("<|im_start|>system\n{}<|im_end|>\n", system);
  for (const Message& m : messages) {
    if (m.role == Role::user) s += fmt::format("<|im_start|>user\n{}<|im_end|>\n", m.content);
    if (m.role == Role::assistant) s += fmt::format("<|im_start|>assistant\n{}<|im_end|>\n", without_think(m.content));
  }
  return s + "<|im_start|>assistant\n" + chatml_reply_opening(o);
}

// gpt-oss's template: history replies in the final channel, their analysis dropped.
std::string render_harmony(const Options& o, std::string_view system, std::span<const Message> messages) {
  std::string s = harmony_system_message(o.reasoning_effort) + harmony_developer_message(system);
  for (const Message& m : messages) {
    if (m.role == Role::user) s += fmt::format("<|start|>user<|message|>{}<|end|>", m.content);
    if (m.role == Role::assistant) s += fmt::format("<|start|>assistant<|channel|>final<|message|>{}<|end|>", m.content);
  }
  s += "<|start|>assistant";
  if (o.no_think) s += "<|channel|>final<|message|>";
  return s;
}

// Mixtral's template: "[INST] user [/INST] answer</s>"; the system text opens the first user turn.
std::string render_mistral(std::string_view system, std::span<const Message> messages) {
  std::string s;
  bool first_user = true;
  for (const Message& m : messages) {
    if (m.role == Role::user) {
      if (first_user && !system.empty())
        s += fmt::format("[INST] {}\n\n{} [/INST]", system, m.content);
      else
        s += fmt::format("[INST] {} [/INST]", m.content);
      first_user = false;
    }
    if (m.role == Role::assistant) s += fmt::format(" {}</s>", m.content);
  }
  return s;
}

// Gemma 3's template: assistant turns as "model", the system text (with a blank line) opening the first user turn.
std::string render_gemma(std::string_view system, std::span<const Message> messages) {
  std::string s;
  bool first_user = true;
  for (const Message& m : messages) {
    if (m.role == Role::user) {
      s += gemma_turn("user", first_user && !system.empty() ? std::string(system) + "\n\n" : "", m.content);
      first_user = false;
    }
    if (m.role == Role::assistant) s += gemma_turn("model", "", m.content);
  }
  return s + "<start_of_turn>model\n";
}

// Gemma 4's template: the system text in a system turn, replies as "model" turns with any thought channel
// dropped (the text after the last "<channel|>"), the generation prompt with the empty thought channel.
std::string render_gemma4(std::string_view system, std::span<const Message> messages) {
  std::string s = system.empty() ? std::string() : gemma4_turn("system", system);
  for (const Message& m : messages) {
    if (m.role == Role::user) s += gemma4_turn("user", m.content);
    if (m.role == Role::assistant) {
      std::string_view answer = m.content;
      if (const size_t end = answer.rfind("<channel|>"); end != std::string_view::npos) answer.remove_prefix(end + 10);
      s += gemma4_turn("model", answer);
    }
  }
  return s + std::string(kGemma4ReplyOpening);
}

}  // namespace

std::optional<Role> parse_role(std::string_view name) {
  if (name == "system") return Role::system;
  if (name == "developer") return Role::developer;
  if (name == "user") return Role::user;
  if (name == "assistant") return Role::assistant;
  return std::nullopt;
}

std::string render_conversation(const Options& opts, std::span<const Message> messages) {
  reasoning_effort_level(opts.reasoning_effort);
  bool any_user = false;
  for (const Message& m : messages) any_user = any_user || m.role == Role::user;
  if (!any_user) fail("the conversation has no user message");
  if (messages.back().role != Role::user) {
    fail("the last message of the conversation is not a user message (continuing an assistant message is not "
         "supported)");
  }
  const std::string system = merged_system(opts, messages);
  switch (opts.format) {
    case Format::chatml: return render_chatml(opts, system, messages);
    case Format::harmony: return render_harmony(opts, system, messages);
    case Format::mistral: return render_mistral(system, messages);
    case Format::gemma: return render_gemma(system, messages);
    case Format::gemma4: return render_gemma4(system, messages);
  }
  return {};
}

}  // namespace moetier::chat
