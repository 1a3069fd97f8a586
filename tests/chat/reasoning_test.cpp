// Splitting replies into reasoning and answer: ChatML think blocks and harmony channels, on replies tokenized
// with the real vocabularies (../shared/tokenizer) and fed token piece by token piece as the server does, and
// the same result for any split of the text.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "gguf/gguf.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace moetier::chat {
namespace {

struct Split {
  std::string reasoning, content;
  bool operator==(const Split&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Split& s) {
  return os << "{reasoning '" << s.reasoning << "', content '" << s.content << "'}";
}

// Feeds `pieces` in order, then finish(); the concatenation of every delta.
Split parse(Format f, ReplyStart start, const std::vector<std::string>& pieces) {
  ReasoningParser p(f, start);
  Split out;
  auto add = [&](const ReplyDelta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
  };
  for (const std::string& piece : pieces) add(p.feed(piece));
  add(p.finish());
  return out;
}

std::vector<std::string> bytes_of(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

std::vector<std::string> random_split(const std::string& s, std::mt19937& rng) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 6)(rng);  // empty pieces included
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// The whole text, byte by byte and 50 random splits all give the same result; returns it.
Split parse_every_way(Format f, ReplyStart start, const std::string& text) {
  const Split whole = parse(f, start, {text});
  EXPECT_EQ(parse(f, start, bytes_of(text)), whole) << "byte by byte: '" << text << "'";
  std::mt19937 rng(static_cast<unsigned>(text.size()));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(parse(f, start, random_split(text, rng)), whole) << "'" << text << "'";
  return whole;
}

const Tokenizer& vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) {
    const auto m = gguf::GgufModel::open(test::shared_dir() / "tokenizer" / (name + ".gguf"));
    slot = std::make_unique<Tokenizer>(Tokenizer::from_metadata(m.metadata()));
  }
  return *slot;
}

// The reply as the server sees it: tokenized with the control tokens parsed, each token rendered with its
// control text.
std::vector<std::string> token_pieces(const std::string& vocab_name, const std::string& reply) {
  const Tokenizer& tok = vocab(vocab_name);
  std::vector<std::string> pieces;
  for (int32_t id : tok.encode(reply, false, true)) pieces.push_back(tok.token_to_piece(id, true));
  return pieces;
}

// Parsed token by token with the real vocab; also checks the any-split property on the same text.
Split parse_tokens(Format f, ReplyStart start, const std::string& vocab_name, const std::string& reply) {
  const std::vector<std::string> pieces = token_pieces(vocab_name, reply);
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, reply);
  const Split by_token = parse(f, start, pieces);
  EXPECT_EQ(by_token, parse_every_way(f, start, reply));
  return by_token;
}

TEST(Reasoning, HarmonyMarkersAreSingleTokensOfTheRealVocab) {
  for (const char* marker : {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"})
    EXPECT_EQ(vocab("gptoss-vocab").encode(marker, false, true).size(), 1u) << marker;
  for (const char* marker : {"<think>", "</think>"}) EXPECT_EQ(vocab("qwen3-vocab").encode(marker, false, true).size(), 1u);
}

TEST(Reasoning, HarmonyAnalysisThenFinal) {
  const Split s = parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab",
                               "<|channel|>analysis<|message|>The user greets; answer politely.<|end|>"
                               "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>");
  EXPECT_EQ(s, (Split{"The user greets; answer politely.", "Hello! How can I help?"}));
}

TEST(Reasoning, HarmonyCommentaryIsAnswerAndHeadersAreHidden) {
  const Split s = parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab",
                               " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
                               "{\"city\":\"Paris\"}<|call|>");
  EXPECT_EQ(s, (Split{"", "{\"city\":\"Paris\"}"}));
}

TEST(Reasoning, HarmonyBareFinalWithoutMarkup) {
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab", "Paris is the capital of France."),
            (Split{"", "Paris is the capital of France."}));
}

TEST(Reasoning, HarmonyMalformedHeadersGiveContent) {
  // An unknown channel name with its message marker: the message is answer text, the header is not shown.
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab",
                         "<|channel|>commentary?<|message|>Sure, here it is.<|return|>"),
            (Split{"", "Sure, here it is."}));
  // A header that never reaches <|message|>: the channel word is hidden, the rest is answer text.
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab", "<|channel|>commentary? Sure thing."),
            (Split{"", "Sure thing."}));
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab", "<|channel|>analysis\nThe answer is 4."),
            (Split{"", "The answer is 4."}));
  // After a well-formed analysis message, a broken second header still yields its text.
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab",
                         "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final Done.<|return|>"),
            (Split{"Think.", "Done."}));
  // A header running on without <|message|> is cut at the bound and released, not held forever.
  const std::string runaway = "<|channel|>final " + std::string(400, 'x');
  ReasoningParser p(Format::harmony, ReplyStart::open);
  EXPECT_FALSE(p.feed(runaway).content.empty());
}

TEST(Reasoning, HarmonyCutInTheMiddleOfAThought) {
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab",
                         "<|channel|>analysis<|message|>We need to compute 17*23. That is"),
            (Split{"We need to compute 17*23. That is", ""}));
  // Cut inside the header: nothing of it is shown.
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::open, "gptoss-vocab", "<|channel|>analy"), (Split{"", ""}));
}

TEST(Reasoning, HarmonyPromptOpenedTheAnswerOrTheThought) {
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::answer, "gptoss-vocab", "Four.<|return|>"), (Split{"", "Four."}));
  EXPECT_EQ(parse_tokens(Format::harmony, ReplyStart::thought, "gptoss-vocab",
                         "2+2 is 4.<|end|><|start|>assistant<|channel|>final<|message|>Four.<|return|>"),
            (Split{"2+2 is 4.", "Four."}));
}

TEST(Reasoning, ChatMLThinkBlock) {
  EXPECT_EQ(parse_tokens(Format::chatml, ReplyStart::open, "qwen3-vocab",
                         "<think>\nThe user asks 2+2; that is 4.\n</think>\n\nIt is 4."),
            (Split{"The user asks 2+2; that is 4.", "It is 4."}));
  EXPECT_EQ(parse_tokens(Format::chatml, ReplyStart::open, "qwen3-vocab", "No thinking here. <think> stays text"),
            (Split{"", "No thinking here. <think> stays text"}));
  // Cut by max_tokens in the middle of the thought: it stays reasoning.
  EXPECT_EQ(parse_tokens(Format::chatml, ReplyStart::open, "qwen3-vocab", "<think>\nLet me count: one, two, thr"),
            (Split{"Let me count: one, two, thr", ""}));
  EXPECT_EQ(parse_tokens(Format::chatml, ReplyStart::open, "qwen3-vocab", "<think>\nAlmost done\n</thi"),
            (Split{"Almost done\n</thi", ""}));
}

TEST(Reasoning, ChatMLPromptOpenedTheThoughtOrTheAnswer) {
  EXPECT_EQ(parse_tokens(Format::chatml, ReplyStart::thought, "qwen3-vocab", "Simple sum.\n</think>\n\n4"),
            (Split{"Simple sum.", "4"}));
  // The empty think block of enable_thinking = false was in the prompt: everything is answer.
  EXPECT_EQ(parse_tokens(Format::chatml, ReplyStart::answer, "qwen3-vocab", "4, and </think> is just text"),
            (Split{"", "4, and </think> is just text"}));
}

TEST(Reasoning, MistralIsAllAnswer) {
  EXPECT_EQ(parse_every_way(Format::mistral, ReplyStart::open, " <think>x</think><|channel|>y"),
            (Split{"", " <think>x</think><|channel|>y"}));
}

TEST(Reasoning, TextIsReleasedAsSoonAsItCannotBeAMarker) {
  ReasoningParser p(Format::harmony, ReplyStart::answer);
  EXPECT_EQ(p.feed("Hello <|").content, "Hello ");
  EXPECT_EQ(p.feed("x").content, "<|x");
  EXPECT_EQ(p.feed("<|en").content, "");
  EXPECT_TRUE(p.feed("d|>").empty());
  ReasoningParser q(Format::chatml, ReplyStart::thought);
  EXPECT_EQ(q.feed("one ").reasoning, "one");
  EXPECT_EQ(q.feed("two").reasoning, " two");
}

// Property: on random texts made of marker fragments, words and multi-byte characters, every split gives the
// same result as the whole text, for every format and start, and nothing throws.
TEST(Reasoning, AnySplitGivesTheSameResult) {
  const std::vector<std::string> atoms = {
      "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>", "<|call|>", "<|constrain|>", "analysis",
      "final",       "commentary?", "assistant", " to=f", " ",        "\n",        "<",        "|",       "<|",
      "|>",          "<think>",     "</think>", "</",    "word",      "\xC3\xA9",  "\xE2\x82",  "\xAC",   "x"};
  std::mt19937 rng(25);
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 24)(rng);
    for (int i = 0; i < n; ++i) text += atoms[std::uniform_int_distribution<size_t>(0, atoms.size() - 1)(rng)];
    for (Format f : {Format::chatml, Format::harmony, Format::mistral})
      for (ReplyStart s : {ReplyStart::open, ReplyStart::thought, ReplyStart::answer}) parse_every_way(f, s, text);
  }
}

}  // namespace
}  // namespace moetier::chat
