#include "server/text_stream.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace moetier::server {

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The length of the sequence a lead byte starts (RFC 3629: C2..DF two bytes, E0..EF three, F0..F4 four); 0 for a
// byte that starts no valid sequence (ASCII is complete by itself and never held).
size_t sequence_length(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The range the second byte must fall in after `lead` (RFC 3629's table): E0 and F0 exclude overlong forms, ED the
// surrogates U+D800..DFFF, F4 everything above U+10FFFF.
bool valid_second(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return is_continuation(b);
  }
}

// How many bytes at the end of `s` are the valid start of a sequence that is not complete yet (0..3).
size_t incomplete_tail(std::string_view s) {
  // The lead byte of an unfinished sequence is at most 3 bytes from the end, with only continuation bytes after.
  for (size_t k = 1; k <= std::min<size_t>(3, s.size()); ++k) {
    const auto b = static_cast<unsigned char>(s[s.size() - k]);
    if (is_continuation(b)) continue;
    const size_t len = sequence_length(b);
    if (len <= k) return 0;  // not a lead, or its sequence is already complete (or overlong and invalid)
    if (k >= 2 && !valid_second(b, static_cast<unsigned char>(s[s.size() - k + 1]))) return 0;
    return k;
  }
  return 0;  // three continuation bytes: whatever they belong to is complete or invalid
}

}  // namespace

std::string Utf8Buffer::push(std::string_view bytes) {
  std::string out = std::move(pending_);
  pending_.clear();
  out.append(bytes);
  const size_t keep = incomplete_tail(out);
  pending_.assign(out, out.size() - keep, keep);
  out.resize(out.size() - keep);
  return out;
}

std::string Utf8Buffer::flush() { return std::exchange(pending_, {}); }

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  Result r;
  if (stopped_) return r;
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(text);

  // The stop whose occurrence ends first is the one that completes first as text streams in; of two ending at
  // the same byte the longer (earlier-starting) one wins. Choosing by the end, not the start, makes the result
  // the same however the text is split into pushes: an occurrence that began earlier but is still incomplete
  // when another completes would, streamed, never be seen.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t pos = buf.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_start = pos;
      best_end = end;
    }
  }
  if (best_start != std::string::npos) {
    stopped_ = true;
    buf.resize(best_start);
    r.text = std::move(buf);
    r.stopped = true;
    return r;
  }

  // Hold the longest suffix that some stop string starts with (shorter than that stop: a whole one was not found).
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(buf.size(), s.size() - 1); k > hold; --k) {
      if (std::string_view(buf).substr(buf.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  held_.assign(buf, buf.size() - hold, hold);
  buf.resize(buf.size() - hold);
  r.text = std::move(buf);
  return r;
}

std::string StopMatcher::flush() { return std::exchange(held_, {}); }

}  // namespace moetier::server
