// The parser keeps every decision a function of the text so far, never of where the pieces were cut: text is
// released only once no later byte can change which part it belongs to, so any split of a reply gives the same
// concatenated reasoning and content as the whole reply fed at once.
#include "chat/reasoning.h"

#include <algorithm>
#include <array>
#include <utility>

namespace moetier::chat {
namespace {

constexpr std::string_view kThink = "<think>";
constexpr std::string_view kEndThink = "</think>";

// Harmony's markers (openai/harmony: special tokens of o200k_harmony).
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::array<std::string_view, 7> kHarmonyMarkers = {kStart, kChannel, kMessage, kConstrain,
                                                            kEnd,   kReturn,  kCall};
// A tool call's header starts with its recipient instead of a channel ("<|start|>assistant to=functions.f...").
constexpr std::string_view kRecipient = " to=";

// A header longer than this (bytes, markers included) without <|message|> is taken as malformed: real ones are
// a role, a recipient, a channel and a content type, well under 100 bytes. Bounds what a header holds back.
constexpr size_t kMaxHeader = 256;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Length of the longest suffix of `s` that is a proper prefix of one of `markers` (text to hold back).
template <size_t N>
size_t partial_marker_suffix(std::string_view s, const std::array<std::string_view, N>& markers) {
  size_t longest = 0;
  for (std::string_view m : markers) longest = std::max(longest, m.size() - 1);
  for (size_t len = std::min(longest, s.size()); len > 0; --len) {
    const std::string_view tail = s.substr(s.size() - len);
    for (std::string_view m : markers)
      if (tail.size() < m.size() && starts_with(m, tail)) return len;
  }
  return 0;
}

// The first harmony marker in `s`: its position and which (npos and empty when none).
std::pair<size_t, std::string_view> find_harmony_marker(std::string_view s) {
  for (size_t p = s.find("<|"); p != std::string_view::npos; p = s.find("<|", p + 1)) {
    for (std::string_view m : kHarmonyMarkers)
      if (starts_with(s.substr(p), m)) return {p, m};
  }
  return {std::string_view::npos, {}};
}

// The channel a header names: the word after its last <|channel|> (up to a space or a marker).
std::string_view header_channel(std::string_view header) {
  const size_t c = header.rfind(kChannel);
  if (c == std::string_view::npos) return {};
  std::string_view name = header.substr(c + kChannel.size());
  return name.substr(0, name.find_first_of(" <\n"));
}

}  // namespace

ReasoningParser::ReasoningParser(Format format, ReplyStart start) : format_(format) {
  switch (format) {
    case Format::chatml:
      state_ = start == ReplyStart::open ? State::opening : State::body;
      part_ = start == ReplyStart::thought ? Part::reasoning : Part::content;
      skip_space_ = start == ReplyStart::thought;
      break;
    case Format::harmony:
      state_ = start == ReplyStart::open ? State::boundary : State::body;
      part_ = start == ReplyStart::thought ? Part::reasoning : Part::content;
      break;
    case Format::mistral:
    case Format::gemma:
    case Format::gemma4:
      break;
  }
}

ReplyDelta ReasoningParser::feed(std::string_view text) {
  ReplyDelta out;
  held_ += text;
  run(out, false);
  return out;
}

ReplyDelta ReasoningParser::finish() {
  ReplyDelta out;
  run(out, true);
  return out;
}

void ReasoningParser::emit(ReplyDelta& out, std::string_view text) {
  if (skip_space_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    skip_space_ = false;
  }
  (part_ == Part::reasoning ? out.reasoning : out.content) += text;
}

void ReasoningParser::run(ReplyDelta& out, bool final) {
  // Each step consumes a decided prefix of held_ and says whether to go on; it stops when the rest must wait.
  for (bool more = true; more;) {
    switch (state_) {
      case State::opening: more = step_opening(out, final); break;
      case State::boundary: more = step_boundary(final); break;
      case State::header: more = step_header(final); break;
      case State::body:
        more = format_ == Format::harmony ? step_harmony_body(out, final) : step_chatml_body(out, final);
        break;
    }
  }
}

// ChatML, open: whitespace then <think> opens the reasoning; anything else makes the whole reply answer
// (the whitespace included).
bool ReasoningParser::step_opening(ReplyDelta& out, bool final) {
  size_t i = 0;
  while (i < held_.size() && is_space(held_[i])) ++i;
  const std::string_view rest = std::string_view(held_).substr(i);
  if (starts_with(rest, kThink)) {
    held_.erase(0, i + kThink.size());
    state_ = State::body;
    part_ = Part::reasoning;
    skip_space_ = true;
    return true;
  }
  if (!final && starts_with(kThink, rest)) return false;  // all whitespace, or a prefix of <think>
  state_ = State::body;
  part_ = Part::content;
  emit(out, held_);
  held_.clear();
  return false;
}

// ChatML and Mistral: the reasoning ends at </think> (the whitespace around the marker dropped); the answer
// has no marker to watch for.
bool ReasoningParser::step_chatml_body(ReplyDelta& out, bool final) {
  const std::string_view h = held_;
  if (part_ == Part::content) {
    emit(out, h);
    held_.clear();
    return false;
  }
  if (const size_t p = h.find(kEndThink); p != std::string_view::npos) {
    std::string_view thought = h.substr(0, p);
    while (!thought.empty() && is_space(thought.back())) thought.remove_suffix(1);
    emit(out, thought);
    held_.erase(0, p + kEndThink.size());
    part_ = Part::content;
    skip_space_ = true;
    return true;
  }
  if (final) {
    emit(out, h);
    held_.clear();
    return false;
  }
  // Hold back a possible start of </think> and the whitespace before it (dropped if the marker follows).
  size_t keep = partial_marker_suffix(h, std::array{kEndThink});
  while (keep < h.size() && is_space(h[h.size() - keep - 1])) ++keep;
  emit(out, h.substr(0, h.size() - keep));
  held_.erase(0, h.size() - keep);
  return false;
}

// Harmony, inside a message: the text is released up to the next marker. <|end|>, <|return|> and <|call|>
// close the message, <|start|> and <|channel|> open a header; a stray <|message|> or <|constrain|> is dropped.
bool ReasoningParser::step_harmony_body(ReplyDelta& out, bool final) {
  const std::string_view h = held_;
  const auto [p, marker] = find_harmony_marker(h);
  if (p == std::string_view::npos) {
    const size_t keep = final ? 0 : partial_marker_suffix(h, kHarmonyMarkers);
    emit(out, h.substr(0, h.size() - keep));
    held_.erase(0, h.size() - keep);
    return false;
  }
  emit(out, h.substr(0, p));
  if (marker == kStart || marker == kChannel) {
    state_ = State::header;
    header_ = marker == kChannel ? kChannel : std::string_view{};
  } else if (marker == kEnd || marker == kReturn || marker == kCall) {
    state_ = State::boundary;
  }
  held_.erase(0, p + marker.size());
  return true;
}

// Harmony, between messages: a header begins with <|start|>, <|channel|> or a recipient; other text is answer
// text without markup.
bool ReasoningParser::step_boundary(bool final) {
  const std::string_view h = held_;
  for (std::string_view opener : {kStart, kChannel, kRecipient}) {
    if (starts_with(h, opener)) {
      state_ = State::header;
      header_ = opener == kStart ? std::string_view{} : opener;
      held_.erase(0, opener.size());
      return true;
    }
  }
  for (std::string_view opener : {kStart, kChannel, kRecipient})
    if (!final && starts_with(opener, h)) return false;  // empty, or the start of an opener
  state_ = State::body;
  part_ = Part::content;
  return !h.empty();
}

// Harmony, in a header: it ends at <|message|>, and its channel says the part (analysis: reasoning; final,
// commentary or anything else: answer). A newline, a message-closing marker, <|start|>, the length bound or
// the end of the reply before <|message|> make it malformed.
bool ReasoningParser::step_header(bool final) {
  const std::string_view h = held_;
  const auto [p, marker] = find_harmony_marker(h);
  const size_t nl = h.find('\n');
  const size_t stop = std::min(p, nl);
  // Text of the header that is decided: up to the first marker or newline, else all but a partial marker.
  const size_t decided = stop != std::string_view::npos ? stop : h.size() - partial_marker_suffix(h, kHarmonyMarkers);
  if (header_.size() + decided > kMaxHeader) {
    const size_t cut = kMaxHeader - std::min(kMaxHeader, header_.size());
    header_ += h.substr(0, cut);
    held_.erase(0, cut);
    end_header_malformed();
    return true;
  }
  if (stop == std::string_view::npos) {
    if (!final) return false;
    header_ += h;
    held_.clear();
    end_header_malformed();
    return true;
  }
  header_ += h.substr(0, stop);
  if (stop == p && (marker == kChannel || marker == kConstrain)) {
    header_ += marker;
    held_.erase(0, stop + marker.size());
    return true;
  }
  if (stop == p && marker == kMessage) {
    held_.erase(0, stop + marker.size());
    state_ = State::body;
    part_ = header_channel(header_) == "analysis" ? Part::reasoning : Part::content;
    skip_space_ = false;
    header_.clear();
    return true;
  }
  held_.erase(0, stop);  // the newline or marker is the answer's (a marker is then read as in a body)
  end_header_malformed();
  return true;
}

// A header that never reached <|message|>: its first word (the channel name, or the role or recipient when no
// channel was named) stays hidden as header text; what follows it is answer text.
void ReasoningParser::end_header_malformed() {
  std::string_view rest = header_;
  if (const size_t c = rest.rfind(kChannel); c != std::string_view::npos) rest.remove_prefix(c + kChannel.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  rest.remove_prefix(std::min(rest.size(), rest.find_first_of(" <")));
  std::string text;
  for (size_t p = 0; p < rest.size();) {
    const auto [m, marker] = find_harmony_marker(rest.substr(p));
    if (m == std::string_view::npos) {
      text += rest.substr(p);
      break;
    }
    text += rest.substr(p, m);
    p += m + marker.size();
  }
  held_.insert(0, text);
  header_.clear();
  state_ = State::body;
  part_ = Part::content;
  skip_space_ = true;
}

}  // namespace moetier::chat
