// Splitting a model's reply into its reasoning and its answer as the tokens arrive: Qwen's <think>…</think> block
// and harmony's channels (analysis = reasoning, final = answer; commentary is treated as answer text). What the
// server sends as `reasoning_content` and `content`, identically streamed and not streamed (the non-streamed
// reply is the concatenation of the streamed deltas), also when the reply is cut in the middle of a thought.
//
// Input is the reply's text with control tokens rendered (Tokenizer::token_to_piece(id, true)), so harmony's
// <|channel|>, <|message|>, <|end|>, <|start|> markers are visible. Any text that could be the start of a marker
// is held back until it is known not to be one; finish() releases it.
//
// Harmony is parsed leniently: a reply with no channel markup is answer text; a malformed header (an unknown
// channel such as "commentary?", a header without <|message|>) makes what follows answer text rather than an
// error; the header text itself is never shown. A header ends at <|message|>; one that meets a newline,
// <|end|>, <|return|>, <|call|> or <|start|> first, runs past 256 bytes, or is cut by finish() is malformed: its
// channel word (or role word) stays hidden and the rest of it, leading spaces dropped, is answer text.
//
// ChatML: the whitespace just inside <think>…</think> and before the answer is dropped (Qwen3's template
// strips it when it re-reads a reply: reasoning_content.strip('\n'), content.lstrip('\n')).
#pragma once

#include <string>
#include <string_view>

#include "chat/chat_format.h"

namespace moetier::chat {

struct ReplyDelta {
  std::string reasoning;  // reasoning text (UTF-8), possibly empty
  std::string content;    // answer text, possibly empty
  bool empty() const { return reasoning.empty() && content.empty(); }
};

// Where the prompt left the reply.
enum class ReplyStart {
  open,     // the reply lays out its own parts: ChatML may begin with <think>, harmony with a channel header
  thought,  // the prompt opened the reasoning (ChatML ending in "<think>\n"): reasoning until </think>
  answer,   // the prompt opened the answer (ChatML's empty think block, harmony's final channel, Mistral)
};

class ReasoningParser {
 public:
  // ChatML, open: a reply that starts with <think> (after optional whitespace) is reasoning until </think>, one
  // that does not is all answer. Harmony, open: channel headers decide; text outside any header is answer.
  // Mistral: everything is answer.
  ReasoningParser(Format format, ReplyStart start);

  // The text of the next token(s); returns what can be released now.
  ReplyDelta feed(std::string_view text);
  // End of the reply (end of generation, max_tokens, a stop string): releases anything held back, as the part
  // it was in (an unfinished thought stays reasoning).
  ReplyDelta finish();

 private:
  enum class State {
    body,      // text of part_, watching for the markers that end it (none for an answer in ChatML or Mistral)
    opening,   // ChatML, open: leading whitespace seen, not yet known whether <think> follows
    boundary,  // harmony: at a message boundary (reply start, after <|end|>), a header may follow
    header,    // harmony: inside a message header, until <|message|>
  };
  enum class Part { reasoning, content };

  // Consumes held_ as far as it is decided; `final` releases the rest.
  void run(ReplyDelta& out, bool final);
  bool step_opening(ReplyDelta& out, bool final);
  bool step_chatml_body(ReplyDelta& out, bool final);
  bool step_harmony_body(ReplyDelta& out, bool final);
  bool step_boundary(bool final);
  bool step_header(bool final);
  void end_header_malformed();
  void emit(ReplyDelta& out, std::string_view text);

  Format format_;
  State state_ = State::body;
  Part part_ = Part::content;
  bool skip_space_ = false;  // drop whitespace at the start of the part (after <think>, after </think>)
  std::string held_;         // text not yet decided: may be the start of a marker, or a header being read
  std::string header_;       // harmony: the current header's text so far (markers included)
};

}  // namespace moetier::chat
