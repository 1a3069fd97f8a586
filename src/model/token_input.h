// A sequence of token ids given by the user (`run --tokens`, `eval --tokens`) or by an oracle case file, parsed
// from JSON and checked before anything runs. Two shapes are accepted:
//   [1, 2, 3]                                       a plain list: the prompt
//   {"prompt_tokens": [...], "greedy_tokens": [...]} an oracle case: the prompt, then its greedy continuation;
//                                                   other keys (texts, logits file names) are ignored
// Ids are JSON integers in [0, 2^31) and, when the vocabulary size is known, in [0, n_vocab). A fractional or
// exponent number (1.0, 1e12), a bool, a string, an id that does not fit int32_t and an empty prompt are errors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::model {

struct TokenInput {
  // The prompt, then (an oracle case) its greedy tokens but the last: [n_tokens]. Row i of a teacher-forced
  // evaluation over it predicts tokens[i + 1], so the last greedy token is only ever a target.
  std::vector<int32_t> tokens;
  // tokens[0, n_prompt) are the prompt (prompt_tokens, or the whole plain list): what `run --tokens` runs.
  int64_t n_prompt = 0;
  // `eval`'s default batched prefix, tokens[0, n_prefill), the rest run one at a time: the prompt of an oracle
  // case (as the reference engine ran it); all but the last token of a plain list (at least 1).
  int64_t n_prefill = 0;
};

// Parses `json_text`. `source` names where it came from in every error ("--tokens [1,2", "--tokens ids.json", a
// path). `n_vocab` > 0 checks every id against the vocabulary; 0 skips that check (the caller has no model yet).
// Bytes >= 0x80 are read as '?' first: oracle cases hold detokenised random bytes (ill-formed UTF-8) in their
// text fields, and only the numbers matter here. Throws moetier::Error for anything else than the shapes above.
TokenInput parse_token_input(std::string_view json_text, const std::string& source, int64_t n_vocab);

// The value of a --tokens flag (or a case file's path): JSON given inline when it starts with '[', otherwise the
// path of a file holding it. Errors begin "--tokens <arg>:"; a missing file or a directory is one.
TokenInput read_token_input(const std::string& arg, int64_t n_vocab);

// Checks every id of `t` against a vocabulary known only later (`eval` reads its tokens before the model loads,
// to size the context). Throws moetier::Error naming `source` and the first id outside [0, n_vocab).
void check_token_vocab(const TokenInput& t, const std::string& source, int64_t n_vocab);

}  // namespace moetier::model
