// The text a streamed reply releases, token by token: only whole UTF-8 characters (a character split across two
// tokens is held until its last byte arrives, so no delta carries U+FFFD because of a split), and never any part
// of a stop string (text that may be the start of one is held until it is known not to be).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moetier::server {

// Holds back the bytes of an incomplete UTF-8 sequence at the end of what was pushed. Bytes that can never be
// part of a valid sequence (a stray continuation byte, 0xF8..0xFF, an overlong or surrogate lead) are released
// as they are: the JSON writer replaces them, as it would any invalid text.
class Utf8Buffer {
 public:
  // The bytes before any incomplete sequence at the end (those stay held).
  std::string push(std::string_view bytes);
  // Whatever is held (an unfinished sequence at the end of the reply).
  std::string flush();

 private:
  std::string pending_;  // at most 3 bytes: a valid lead byte and some of its continuation bytes
};

// Finds the first occurrence of any stop string in the text pushed so far, across push boundaries. "First" is the
// occurrence that ends first (the one a stream completes first); of two ending at the same byte, the longer. So the
// result is the same however the text is split into pushes, e.g. stops {"abcdef", "cd"} cut "zabcdefz" to "zab".
class StopMatcher {
 public:
  // Empty stop strings are not allowed (the request parser refuses them).
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // text that is certainly not part of a stop string, in order
    bool stopped = false;  // a stop string was completed: `text` ends just before it, and the reply ends
  };
  // After a stop, every push returns nothing.
  Result push(std::string_view text);
  // The text held back at the end of the reply (a partial match that never completed).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // the longest suffix of the text so far that is a proper prefix of a stop string
  bool stopped_ = false;
};

}  // namespace moetier::server
