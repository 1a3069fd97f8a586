// A whole conversation (system, developer, user and assistant messages, as an OpenAI chat request carries them)
// laid out as text in one of the chat formats of chat_format.h, ending with the opening of the assistant's reply
// (the generation prompt). What `moetier serve` tokenizes for /v1/chat/completions; `run --chat` renders its one
// user turn the same way (render_conversation of {system?, user} equals render_user_turn(first = true)).
//
// Sources: Qwen3's chat template (tokenizer_config.json: the system message first, assistant history without
// its <think> block, `enable_thinking=false` adds an empty one); gpt-oss's chat template and the harmony format
// (system message with "Reasoning: low|medium|high", developer message "# Instructions", assistant history in
// the final channel); Mixtral's [INST] template (the system message prepended to the first user turn).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "chat/chat_format.h"

namespace moetier::chat {

enum class Role { system, developer, user, assistant };

struct Message {
  Role role = Role::user;
  std::string content;
};

// "system", "developer", "user", "assistant"; nullopt for another name (the server answers 400 naming it).
std::optional<Role> parse_role(std::string_view name);

// The conversation as the format lays it out, with the assistant's opening last. System (and developer)
// messages are merged, in order, into the format's system slot: ChatML's system message, harmony's developer
// instructions, Mistral's first [INST]. opts.system_prompt, when set, comes before them. opts.no_think and
// opts.reasoning_effort apply to the reply being opened. Throws moetier::Error when there is no user message or
// the last message is not a user message (a continuation of an assistant message is not supported).
std::string render_conversation(const Options& opts, std::span<const Message> messages);

}  // namespace moetier::chat
