// Chat formats: how a conversation is laid out as text with control tokens, for `moetier run --chat` and
// `moetier chat`. The text is tokenized with parse_special = true so markers such as <|im_start|> become their
// control tokens.
//
// Sources: ChatML as in Qwen3's tokenizer_config.json chat template (with its empty <think></think> block for
// non-thinking replies); OpenAI's harmony response format (gpt-oss model card, "openai/harmony"); Mistral's
// [INST] instruction format (Mixtral-8x7B-Instruct tokenizer_config.json); Gemma's turns (Gemma 3's chat template,
// ../shared/tokenizer/gemma3-vocab.gguf: "<start_of_turn>user\n…<end_of_turn>\n<start_of_turn>model\n", the
// system text opening the first user turn); Gemma 4's turns ("<|turn>user\n…<turn|>\n<|turn>model\n", the system
// text in its own system turn, and the generation prompt's empty thought channel "<|channel>thought\n<channel|>"
// that the template writes when enable_thinking is off, its default). Qwen3.5/3.6 use ChatML with a template whose generation prompt opens
// the think block itself ("<|im_start|>assistant\n<think>\n"; with enable_thinking false an empty block).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace moetier::chat {

enum class Format { chatml, harmony, mistral, gemma, gemma4 };

std::string_view format_name(Format f);  // "chatml", "harmony", "mistral", "gemma", "gemma4"
// Parse a --chat-format value; throws moetier::Error listing the formats.
Format parse_format(std::string_view name);
// From the model: the tokenizer.chat_template contents when present (its markers identify the format), else
// the architecture (qwen*: ChatML, gpt-oss: harmony, llama: Mistral, gemma4: Gemma 4, other gemma*: Gemma).
// Throws when neither identifies one.
Format detect_format(const gguf::Metadata& md);
// Whether the model's ChatML template opens the reply's think block in its generation prompt (Qwen3.5/3.6:
// '<think>\n' written after "<|im_start|>assistant\n"), rather than leaving the model to open it (Qwen3).
bool template_opens_think(const gguf::Metadata& md);

struct Options {
  Format format = Format::chatml;
  bool no_think = false;       // ChatML: add the empty think block; harmony: answer in the final channel at once
  bool think_opens = false;    // ChatML: the reply opening writes "<think>\n" (template_opens_think) unless no_think
  std::string system_prompt;   // optional system message (ChatML, harmony); Mistral prepends it to the first turn
  std::string reasoning_effort = "medium";  // harmony's "Reasoning:" level in the system message: low, medium, high
};

// Renders one user turn and the opening of the assistant's reply. `first` is true for the first turn of a
// conversation (it carries the system message). `close_previous` is true when the model's previous reply ended
// without its end-of-turn token having been fed back (generation stops at the end-of-generation token without
// evaluating it): the rendered text then begins by closing that reply, so the KV cache holds a well-formed
// conversation across turns.
std::string render_user_turn(const Options& opts, std::string_view user_message, bool first, bool close_previous);

// The reasoning levels harmony's system message names: returns `effort` when it is "low", "medium" or "high";
// throws moetier::Error naming it otherwise.
std::string_view reasoning_effort_level(std::string_view effort);
// Harmony's system message (gpt-oss's chat template, without its "Current date:" line) with the given
// reasoning level, and its developer message ("# Instructions\n\n{instructions}\n\n"; empty text for empty
// instructions). Shared by render_user_turn() and render_conversation() so the two lay out the same text.
std::string harmony_system_message(std::string_view effort);
std::string harmony_developer_message(std::string_view instructions);
// What follows ChatML's "<|im_start|>assistant\n": the empty think block (no_think), "<think>\n" (think_opens)
// or nothing.
std::string chatml_reply_opening(const Options& opts);
// One Gemma turn: "<start_of_turn>{role}\n{prefix}{content, trimmed}<end_of_turn>\n" (role "user" or "model";
// prefix: the system text and a blank line on the first user turn, as Gemma 3's template does).
std::string gemma_turn(std::string_view role, std::string_view prefix, std::string_view content);
// One Gemma 4 turn: "<|turn>{role}\n{content, trimmed}<turn|>\n" (role "system", "user" or "model").
std::string gemma4_turn(std::string_view role, std::string_view content);
// Gemma 4's generation prompt: the model turn opened with the empty thought channel (thinking off). moetier does
// not offer Gemma 4's thinking mode yet (its "<|think|>" system flag and thought channel in replies).
inline constexpr std::string_view kGemma4ReplyOpening = "<|turn>model\n<|channel>thought\n<channel|>";

// The control-token texts the turns of `opts` are made of (what render_user_turn() writes; for harmony also the
// channel marker a reply starts with): a vocabulary without one of them tokenizes it as plain text and the model
// sees no turn structure, so the caller warns. Mistral's "[INST]" is not listed: the original Mistral vocabularies spell it as plain text by design.
std::vector<std::string_view> control_markers(const Options& opts);

}  // namespace moetier::chat
