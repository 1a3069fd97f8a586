// Tokenizer metadata for synthetic models: either a real vocabulary copied from a GGUF file (every
// `tokenizer.*` key, e.g. ../shared/tokenizer/qwen3-vocab.gguf), or a generated SentencePiece-style vocabulary
// (unknown/BOS/EOS, the 256 byte-fallback tokens <0xNN>, then pronounceable pieces) so a synthetic model is
// self-contained and `moetier run` can tokenize any prompt.
#pragma once

#include <cstdint>
#include <filesystem>

#include "gguf/gguf.h"

namespace moetier::synth {

// A generated `llama` (SentencePiece) vocabulary of exactly n_vocab tokens (n_vocab >= 300).
gguf::Metadata make_default_vocab(int64_t n_vocab);

// Every tokenizer.* key of the GGUF file at `path`; throws moetier::Error if it has no tokenizer.ggml.tokens.
gguf::Metadata load_vocab(const std::filesystem::path& path);

}  // namespace moetier::synth
