// Post-load treatment of special tokens: which are control tokens, which end generation, and the order in
// which their texts are cut out of input text.
//
// GGUF files converted by different tools mark chat-markup tokens inconsistently (e.g. "<|end|>" as
// user-defined). The reference (llama.cpp src/llama-vocab.cpp, llama_vocab::impl::load) fixes this by text:
// well-known end-of-turn / fill-in-the-middle markers are forced to control type, and the end-of-generation set
// is eos, eot, eom plus every token whose text is a known end marker. The test vectors depend on this (a
// control token is only matched in input when parse_special is set; a user-defined one always is).
#include <algorithm>
#include <array>
#include <string_view>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace moetier::tokenizer {

namespace {

// End-of-turn markers (also used to find the eot id when the file does not give one), in priority order.
constexpr std::array<std::string_view, 8> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",  // DeepSeek "<｜end▁of▁sentence｜>"
};
constexpr std::string_view kEomText = "<|eom_id|>";

// Fill-in-the-middle markers; the pad/repo/file-separator ones also end generation (a code model that emits
// them has finished the requested span).
constexpr std::array<std::string_view, 12> kFimTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<PRE>", "<|fim_suffix|>", "<fim-suffix>", "<SUF>",
    "<|fim_middle|>", "<fim-middle>", "<MID>",
    "\x3C\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",  // DeepSeek "<｜fim▁begin｜>"
    "\x3C\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",   // DeepSeek "<｜fim▁hole｜>"
    "\x3C\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",    // DeepSeek "<｜fim▁end｜>"
};
constexpr std::array<std::string_view, 6> kFimEndTexts = {
    "<|fim_pad|>", "<fim-pad>", "<PAD>", "<|fim_repo|>", "<|repo_name|>", "<|file_sep|>",
};

// Texts that end generation wherever they appear in a vocab. "<|return|>" and "<|call|>" end a gpt-oss
// (harmony format) turn; "<|end_of_text|>" is Llama-3's document end; "<eos>", "<turn|>" and "<|tool_response>"
// end a Gemma 4 turn. "</s>" is on the reference's list too (added for PaddleOCR), also where it is an HTML tag, as
// in Gemma 3's vocab (id 212, user-defined there): re-typed as control it is no longer matched in text tokenized
// with parse_special = false, which the gemma3-vocab vectors record. Gemma 4 vocabs take it back out of the
// end-of-generation set (below), as the reference does.
constexpr std::array<std::string_view, 15> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<|return|>", "<|call|>", "</s>", "<eos>", "<turn|>", "<|tool_response>",
};

constexpr std::array<std::string_view, 4> kHarmonyUserDefined = {"<|channel|>", "<|message|>", "<|start|>",
                                                                 "<|constrain|>"};

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

void force_control(Vocab& v, int32_t id) { v.tokens[static_cast<size_t>(id)].type = TokenType::control; }

bool is_special_type(TokenType t) {
  return t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown;
}

}  // namespace

void resolve_special_tokens(const gguf::Metadata& md, Vocab& v) {
  for (std::string_view text : kEotTexts) {
    if (auto id = v.find(text)) {
      if (v.eot < 0) v.eot = *id;
      force_control(v, *id);
    }
  }
  if (auto id = v.find(kEomText)) {
    if (v.eom < 0) v.eom = *id;
    force_control(v, *id);
  }
  for (std::string_view text : kFimTexts) {
    if (auto id = v.find(text)) force_control(v, *id);
  }

  std::vector<int32_t> eog;
  for (std::string_view text : kFimEndTexts) {
    if (auto id = v.find(text)) {
      force_control(v, *id);
      eog.push_back(*id);
    }
  }
  for (std::string_view text : kEogTexts) {
    if (auto id = v.find(text)) {
      force_control(v, *id);
      eog.push_back(*id);
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) eog.push_back(id);
  }
  // gpt-oss: "<|end|>" closes one message (the analysis channel) and the assistant continues with
  // "<|start|>assistant..."; only "<|return|>" / "<|call|>" end the turn. Stopping at "<|end|>" would cut the
  // answer off after the reasoning. The reference (llama_vocab::impl::load, "workaround for o200k_harmony")
  // also re-types "<|end|>" as user-defined there, like the other harmony markers below.
  if (v.find("<|return|>")) {
    if (auto end = v.find("<|end|>"); end && *end != v.eos) {
      eog.erase(std::remove(eog.begin(), eog.end(), *end), eog.end());
      if (v.find("<|call|>")) v.tokens[static_cast<size_t>(*end)].type = TokenType::user_defined;
    }
  }
  // Gemma 4 (the vocab with "<|tool_response>"): "</s>" is text there (an HTML tag) and must not end a reply. The
  // reference ("workaround for gemma4 and paddleocr: do not include </s> as an eog token", llama_vocab::impl::load)
  // takes it out of the end-of-generation set and re-types it normal, so it is neither cut out of input text as a
  // special token nor hidden when rendered.
  if (v.find("<|tool_response>")) {
    if (auto s = v.find("</s>"); s && *s != v.eos) {
      eog.erase(std::remove(eog.begin(), eog.end(), *s), eog.end());
      v.tokens[static_cast<size_t>(*s)].type = TokenType::normal;
    }
  }
  // The harmony header markers are user-defined in every vocab that has them (the reference's "quick hack for
  // gpt-oss, always render these tokens", llama_vocab::impl::load): they are matched in input text even with
  // parse_special = false and always rendered, so harmony replies keep their structure in plain output. The
  // gptoss-vocab vectors (parse_special = false) depend on it; "<|return|>" and "<|call|>" stay control.
  for (std::string_view text : kHarmonyUserDefined) {
    if (auto id = v.find(text)) v.tokens[static_cast<size_t>(*id)].type = TokenType::user_defined;
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  v.eog = std::move(eog);

  v.special_tokens.clear();
  for (int32_t id = 0; id < v.n_vocab(); ++id) {
    if (is_special_type(v.tokens[static_cast<size_t>(id)].type)) v.special_tokens.push_back(id);
  }
  std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(), [&](int32_t a, int32_t b) {
    return v.tokens[static_cast<size_t>(a)].text.size() > v.tokens[static_cast<size_t>(b)].text.size();
  });

  // Whitespace stripping around special tokens is an attribute of HF added tokens that GGUF does not store.
  // The reference restores it by model name for Phi-3, whose added tokens strip whitespace on their right
  // (so "<|user|>\n" tokenizes like "<|user|>"), except <unk>, <s> and <|endoftext|>; </s> strips too.
  const std::string name = ascii_lower(md.get_string_or("general.name", ""));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_tokens) v.tokens[static_cast<size_t>(id)].rstrip = true;
    if (auto id = v.find("</s>")) v.tokens[static_cast<size_t>(*id)].rstrip = true;
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (auto id = v.find(text)) v.tokens[static_cast<size_t>(*id)].rstrip = false;
    }
  }
}

}  // namespace moetier::tokenizer
