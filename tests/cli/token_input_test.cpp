// model::parse_token_input / read_token_input, the --tokens reader of `run` and `eval` (model/token_input.h).
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "model/token_input.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::model {
namespace {

// The error parse_token_input throws for `json`, or "" when it throws none.
std::string error_of(const std::string& json, int64_t n_vocab = 0) {
  try {
    parse_token_input(json, "SRC", n_vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenInput, PlainListIsThePrompt) {
  const TokenInput t = parse_token_input("[3, 1, 4, 1]", "SRC", 5);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{3, 1, 4, 1}));
  EXPECT_EQ(t.n_prompt, 4);
  EXPECT_EQ(t.n_prefill, 3);  // eval: all but the last in one batch
  EXPECT_EQ(parse_token_input("[7]", "SRC", 0).n_prefill, 1);
}

// An oracle case: prompt + greedy[:-1] (the last greedy token is only a target); other keys, and ill-formed
// UTF-8 in its text fields, are ignored.
TEST(TokenInput, OracleCaseIsPromptThenGreedyButTheLast) {
  const TokenInput t =
      parse_token_input("{\"prompt\": \"\xff\xfe\", \"prompt_tokens\": [1, 2], \"greedy_tokens\": [5, 6, 7]}", "SRC", 8);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{1, 2, 5, 6}));
  EXPECT_EQ(t.n_prompt, 2);
  EXPECT_EQ(t.n_prefill, 2);
  EXPECT_EQ(parse_token_input("{\"prompt_tokens\": [1, 2]}", "SRC", 0).tokens.size(), 2u);
}

TEST(TokenInput, IdsFitInt32AndTheVocabulary) {
  EXPECT_EQ(parse_token_input("[0, 2147483647]", "SRC", 0).tokens.back(), 2147483647);
  for (const char* bad : {"[2147483648]", "[1000000000000]", "[18446744073709551615]", "[-1]", "[1.0]", "[1e3]",
                          "[true]", "[\"1\"]", "[[1]]", "[null]"}) {
    SCOPED_TRACE(bad);
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("SRC: token 0 is "), std::string::npos) << e;
    EXPECT_NE(e.find("not a token id (a whole number from 0 to 2147483647)"), std::string::npos) << e;
  }
  EXPECT_NE(error_of("[1, 5]", 5).find("SRC: token 1 is 5, not a token id of this model's vocabulary (0 to 4)"),
            std::string::npos);
  EXPECT_NE(error_of("{\"prompt_tokens\": [1], \"greedy_tokens\": [9]}", 5).find("greedy_tokens[0] is 9"),
            std::string::npos);
}

TEST(TokenInput, OtherShapesAreErrorsNamingTheSource) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "SRC: not valid JSON"},
      {"[1, 2", "SRC: not valid JSON"},
      {"[]", "SRC: the list of token ids is empty"},
      {"{\"prompt_tokens\": []}", "SRC: prompt_tokens is empty"},
      {"{\"ids\": [1]}", "SRC: not a JSON list of token ids (an object needs 'prompt_tokens'"},
      {"{\"prompt_tokens\": 3}", "SRC: prompt_tokens is not a JSON list"},
      {"{\"prompt_tokens\": [1], \"greedy_tokens\": {}}", "SRC: greedy_tokens is not a JSON list"},
      {"42", "SRC: not a JSON list of token ids"},
  };
  for (const auto& [json, says] : cases) {
    SCOPED_TRACE(json);
    EXPECT_NE(error_of(json).find(says), std::string::npos) << error_of(json);
  }
}

TEST(TokenInput, ReadsInlineOrAFile) {
  EXPECT_EQ(read_token_input("[4, 2]", 0).tokens, (std::vector<int32_t>{4, 2}));
  const auto file = test::tmp_dir("token_input") / "ids.json";
  std::ofstream(file) << "[4, 2, 0]";
  EXPECT_EQ(read_token_input(file.string(), 5).tokens.size(), 3u);
  for (const auto& [arg, says] : {std::pair{(test::tmp_dir("token_input") / "missing.json").string(), "no such file"},
                                  std::pair{test::tmp_dir("token_input").string(), "is a directory"}}) {
    try {
      read_token_input(arg, 0);
      ADD_FAILURE() << arg << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--tokens " + arg + ": " + says), std::string::npos) << e.what();
    }
  }
}

TEST(TokenInput, CheckTokenVocabNamesTheFirstOutsider) {
  const TokenInput t = parse_token_input("[1, 7, 9]", "SRC", 0);
  EXPECT_NO_THROW(check_token_vocab(t, "SRC", 10));
  try {
    check_token_vocab(t, "SRC", 8);
    ADD_FAILURE() << "id 9 passed a vocabulary of 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SRC: token 2 is 9, not a token id of this model's vocabulary (0 to 7)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moetier::model
