// Streamed text: a UTF-8 character split across pushes is held until complete, invalid bytes pass through, and
// stop strings are found across push boundaries without any part of them being released.
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <utf8proc.h>

#include "server/text_stream.h"

namespace moetier::server {
namespace {

// utf8proc (an independent decoder) accepts the whole string.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  auto left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

// The pieces of `s` cut at the given ascending positions.
std::vector<std::string> split_at(std::string_view s, const std::vector<size_t>& cuts) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (const size_t c : cuts) {
    parts.emplace_back(s.substr(from, c - from));
    from = c;
  }
  parts.emplace_back(s.substr(from));
  return parts;
}

// 2-, 3- and 4-byte characters (U+00E9, U+20AC, U+4E2D, U+10348, U+1F600) between ASCII letters.
const std::string kMixed = "a\xC3\xA9" "b\xE2\x82\xAC" "c\xE4\xB8\xAD" "d\xF0\x90\x8D\x88" "e\xF0\x9F\x98\x80" "f";

TEST(Utf8Buffer, EverySplitOfValidTextReleasesOnlyWholeCharacters) {
  for (size_t cut = 0; cut <= kMixed.size(); ++cut) {
    Utf8Buffer b;
    const std::string first = b.push(std::string_view(kMixed).substr(0, cut));
    const std::string second = b.push(std::string_view(kMixed).substr(cut));
    EXPECT_TRUE(valid_utf8(first)) << cut;
    EXPECT_TRUE(valid_utf8(second)) << cut;
    EXPECT_EQ(first + second, kMixed) << cut;
    EXPECT_EQ(b.flush(), "") << cut;
  }
}

TEST(Utf8Buffer, ByteByByteHoldsUntilTheLastByte) {
  Utf8Buffer b;
  std::string out;
  for (size_t i = 0; i < kMixed.size(); ++i) {
    const std::string got = b.push(std::string_view(kMixed).substr(i, 1));
    EXPECT_TRUE(valid_utf8(got)) << i;
    // Released exactly when a character is complete: the next byte starts a new character (or the text ends).
    const bool boundary = i + 1 == kMixed.size() || (static_cast<unsigned char>(kMixed[i + 1]) & 0xC0) != 0x80;
    EXPECT_EQ(got.empty(), !boundary) << i;
    out += got;
  }
  EXPECT_EQ(out, kMixed);
}

TEST(Utf8Buffer, EveryTwoCutsOfEmojiText) {
  const std::string s = "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xC3\xA9";  // U+1F600 U+1F44D U+00E9
  for (size_t i = 0; i <= s.size(); ++i) {
    for (size_t j = i; j <= s.size(); ++j) {
      Utf8Buffer b;
      std::string out;
      for (const std::string& part : split_at(s, {i, j})) {
        const std::string got = b.push(part);
        EXPECT_TRUE(valid_utf8(got)) << i << " " << j;
        out += got;
      }
      EXPECT_EQ(out + b.flush(), s) << i << " " << j;
    }
  }
}

TEST(Utf8Buffer, BytesThatStartNoValidSequenceAreReleasedAsTheyAre) {
  // A stray continuation byte, bytes that never occur in UTF-8, overlong leads (C0, C1).
  for (const std::string bad : {"\x80", "\xBF", "\xFF", "\xF8", "\xFE", "\xC0", "\xC1", "\xF5"}) {
    Utf8Buffer b;
    EXPECT_EQ(b.push(bad), bad) << static_cast<int>(static_cast<unsigned char>(bad[0]));
    EXPECT_EQ(b.flush(), "");
  }
  // A lead whose second byte rules it out: overlong E0 80, surrogate ED A0, F0 80 overlong, F4 90 > U+10FFFF.
  for (const std::string bad : {"\xE0\x80", "\xED\xA0", "\xF0\x80", "\xF4\x90"}) {
    Utf8Buffer b;
    EXPECT_EQ(b.push(bad), bad);
    EXPECT_EQ(b.flush(), "");
  }
  // Four continuation bytes after a 4-byte lead: the sequence is over-long by one, released.
  Utf8Buffer b;
  EXPECT_EQ(b.push("\xF0\x9F\x98\x80\x80"), "\xF0\x9F\x98\x80\x80");
}

TEST(Utf8Buffer, AHeldLeadIsReleasedWhenTheSequenceBreaks) {
  Utf8Buffer b;
  EXPECT_EQ(b.push("x\xE2"), "x");
  EXPECT_EQ(b.push("y"), "\xE2y");  // ASCII after a lead: the lead is invalid, passed on as is
  EXPECT_EQ(b.push("\xE2\x82"), "");
  EXPECT_EQ(b.push("\xE2"), "\xE2\x82");  // a new lead: the old truncated sequence goes, the new one waits
  EXPECT_EQ(b.push("\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(b.push("\xF0\x9F"), "");
  EXPECT_EQ(b.flush(), "\xF0\x9F");  // the reply ended mid-character
  EXPECT_EQ(b.flush(), "");
  EXPECT_EQ(b.push("ok"), "ok");
}

// --- StopMatcher --------------------------------------------------------------------------------------------

struct Streamed {
  std::string text;
  bool stopped = false;
};

Streamed run(const std::vector<std::string>& stops, const std::vector<std::string>& parts) {
  StopMatcher m(stops);
  Streamed s;
  for (const std::string& p : parts) {
    const StopMatcher::Result r = m.push(p);
    s.text += r.text;
    if (r.stopped) {
      EXPECT_FALSE(s.stopped) << "stopped twice";
      s.stopped = true;
    }
    if (s.stopped) EXPECT_TRUE(m.stopped());
  }
  s.text += m.flush();
  return s;
}

// An independent definition: scan the text byte by byte; at the first end position where some stop string ends,
// cut before the longest one ending there.
Streamed reference(const std::vector<std::string>& stops, std::string_view text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t longest = 0;
    for (const std::string& s : stops) {
      if (s.size() <= end && s.size() > longest && text.substr(end - s.size(), s.size()) == s) longest = s.size();
    }
    if (longest > 0) return {std::string(text.substr(0, end - longest)), true};
  }
  return {std::string(text), false};
}

void expect_every_split_matches(const std::vector<std::string>& stops, const std::string& text) {
  const Streamed want = reference(stops, text);
  const Streamed whole = run(stops, {text});
  EXPECT_EQ(whole.text, want.text) << text;
  EXPECT_EQ(whole.stopped, want.stopped) << text;
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); ++j) {
      const Streamed got = run(stops, split_at(text, {i, j}));
      EXPECT_EQ(got.text, want.text) << text << " cut at " << i << ", " << j;
      EXPECT_EQ(got.stopped, want.stopped) << text << " cut at " << i << ", " << j;
    }
  }
  std::vector<std::string> bytes;
  for (const char c : text) bytes.emplace_back(1, c);
  const Streamed by_byte = run(stops, bytes);
  EXPECT_EQ(by_byte.text, want.text) << text;
  EXPECT_EQ(by_byte.stopped, want.stopped) << text;
}

TEST(StopMatcher, StopSplitAtEveryPosition) {
  expect_every_split_matches({"</s>"}, "hello</s>world");
  EXPECT_EQ(reference({"</s>"}, "hello</s>world").text, "hello");
  expect_every_split_matches({"\n\nUser:"}, "Answer.\n\nUser: more");
  expect_every_split_matches({"\xE3\x80\x82"}, "\xE4\xB8\xAD\xE6\x96\x87\xE3\x80\x82rest");  // a 3-byte stop "。"
}

TEST(StopMatcher, PartialMatchesThatNeverCompleteAreReleased) {
  expect_every_split_matches({"</s>"}, "a </ b </s c <");
  EXPECT_EQ(run({"</s>"}, {"a </", "s", " c <"}).text, "a </s c <");
  // The held partial match is released by flush at the end of the reply.
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("go ST").text, "go ");
  EXPECT_EQ(m.flush(), "ST");
}

TEST(StopMatcher, SelfOverlappingStop) {
  // After "aa" fails on the third 'a', the match restarts inside what was held.
  expect_every_split_matches({"aab"}, "aaaab");
  EXPECT_EQ(reference({"aab"}, "aaaab").text, "aa");
  StopMatcher m({"aab"});
  EXPECT_EQ(m.push("aaa").text, "a");  // holds only "aa", the longest suffix that "aab" starts with
  const StopMatcher::Result r = m.push("b");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  expect_every_split_matches({"abab"}, "abababx");
}

TEST(StopMatcher, StopsThatArePrefixesOrOverlapsOfEachOther) {
  // "ab" completes before "abc": the reply stops there.
  expect_every_split_matches({"abc", "ab"}, "xxabcd");
  EXPECT_EQ(reference({"abc", "ab"}, "xxabcd").text, "xx");
  // "cd" completes while the longer "abcdef", which began earlier, is still incomplete.
  expect_every_split_matches({"abcdef", "cd"}, "zabcdefz");
  EXPECT_EQ(reference({"abcdef", "cd"}, "zabcdefz").text, "zab");
  // Two stops ending at the same byte: the longer one is cut.
  expect_every_split_matches({"bc", "abc"}, "xabcx");
  EXPECT_EQ(reference({"bc", "abc"}, "xabcx").text, "x");
  // A suffix that is a prefix of one stop and not another.
  expect_every_split_matches({"xyz", "yq"}, "axyq");
  StopMatcher m({"xyz", "yq"});
  EXPECT_EQ(m.push("axy").text, "a");  // "xy" held (a prefix of "xyz"), which also covers "y" for "yq"
  const StopMatcher::Result r = m.push("q");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "x");
}

TEST(StopMatcher, NothingAfterAStop) {
  StopMatcher m({"END"});
  const StopMatcher::Result r = m.push("oneENDtwo");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "one");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more").text, "");
  EXPECT_FALSE(m.push("END").stopped);
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, NoStopsReleasesEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc").text, "abc");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

// Random texts over a small alphabet, so stops occur, overlap and nearly occur often; random splits.
TEST(StopMatcher, RandomTextsAndSplitsAgreeWithTheReference) {
  std::mt19937 rng(2024);
  const std::vector<std::vector<std::string>> stop_sets = {
      {"ab"}, {"aba", "ba"}, {"abc", "bca", "cc"}, {"aaab", "aab"}, {"cab", "abcab", "b c"}};
  for (const auto& stops : stop_sets) {
    for (int t = 0; t < 200; ++t) {
      std::string text;
      const int len = static_cast<int>(rng() % 16);
      for (int i = 0; i < len; ++i) text += "abc "[rng() % 4];
      const Streamed want = reference(stops, text);
      std::vector<std::string> parts;
      for (size_t i = 0; i < text.size();) {
        const size_t n = 1 + rng() % 4;
        parts.push_back(text.substr(i, n));
        i += n;
      }
      const Streamed got = run(stops, parts);
      EXPECT_EQ(got.text, want.text) << text;
      EXPECT_EQ(got.stopped, want.stopped) << text;
      // No byte of the first stop occurrence (or beyond it) was ever released.
      EXPECT_EQ(text.compare(0, got.text.size(), got.text), 0) << text;
    }
  }
}

// The two stages as the server chains them: bytes -> whole characters -> stop matching. Every split of a text
// with multi-byte characters and a multi-byte stop releases valid UTF-8 only and stops at the same place.
TEST(TextStream, Utf8ThenStopsAtEverySplit) {
  const std::string stop = "\xE2\x80\x94" "end";  // "—end"
  const std::string text = "caf\xC3\xA9 \xF0\x9F\x98\x80 \xE2\x80\x94" "en \xE2\x80\x94" "end tail";
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); ++j) {
      Utf8Buffer u;
      StopMatcher m({stop});
      std::string out;
      bool stopped = false;
      for (const std::string& part : split_at(text, {i, j})) {
        const StopMatcher::Result r = m.push(u.push(part));
        EXPECT_TRUE(valid_utf8(r.text)) << i << " " << j;
        out += r.text;
        stopped = stopped || r.stopped;
      }
      EXPECT_TRUE(stopped);
      EXPECT_EQ(out, "caf\xC3\xA9 \xF0\x9F\x98\x80 \xE2\x80\x94" "en ") << i << " " << j;
    }
  }
}

}  // namespace
}  // namespace moetier::server
