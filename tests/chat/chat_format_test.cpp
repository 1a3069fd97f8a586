// Chat formats: detection from the model and the exact text of a turn.
#include <gtest/gtest.h>

#include "chat/chat_format.h"
#include "gguf/gguf.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::chat {
namespace {

TEST(ChatFormat, DetectedFromTheChatTemplate) {
  const auto qwen = gguf::GgufModel::open(test::shared_dir() / "tokenizer/qwen3-vocab.gguf");
  EXPECT_EQ(detect_format(qwen.metadata()), Format::chatml);
  const auto oss = gguf::GgufModel::open(test::oracle_dir() / "models/tiny-gptoss-MXFP4.gguf");
  EXPECT_EQ(detect_format(oss.metadata()), Format::harmony);  // no template: from the architecture
  const auto mixtral = gguf::GgufModel::open(test::oracle_dir() / "models/tiny-mixtral-Q4_0.gguf");
  EXPECT_EQ(detect_format(mixtral.metadata()), Format::mistral);
  const auto gemma = gguf::GgufModel::open(test::shared_dir() / "tokenizer/gemma3-vocab.gguf");
  EXPECT_EQ(detect_format(gemma.metadata()), Format::gemma);
  EXPECT_EQ(parse_format("gemma"), Format::gemma);
  EXPECT_EQ(parse_format("gemma4"), Format::gemma4);
  // The tiny Gemma 4 model has no template: from its architecture.
  const auto gemma4 = gguf::GgufModel::open(test::oracle_dir() / "incoming/gemma4/models/tiny-gemma4-Q8_0.gguf");
  EXPECT_EQ(detect_format(gemma4.metadata()), Format::gemma4);
  EXPECT_THROW(parse_format("alpaca"), Error);
}

// Qwen3's template leaves the think block to the model (only its enable_thinking=false branch writes an empty
// one); a template whose generation prompt writes '<think>\n' itself (Qwen3.5/3.6) is told apart.
TEST(ChatFormat, WhetherTheTemplateOpensTheThinkBlock) {
  const auto qwen3 = gguf::GgufModel::open(test::shared_dir() / "tokenizer/qwen3-vocab.gguf");
  EXPECT_FALSE(template_opens_think(qwen3.metadata()));
  gguf::Metadata md;
  md.set("tokenizer.chat_template",
         gguf::Value::of_string("{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    {%- if "
                                "enable_thinking is defined and enable_thinking is false %}\n        {{- "
                                "'<think>\\n\\n</think>\\n\\n' }}\n    {%- else %}\n        {{- '<think>\\n' }}\n    "
                                "{%- endif %}\n{%- endif %}"));
  EXPECT_TRUE(template_opens_think(md));
  EXPECT_FALSE(template_opens_think(gguf::Metadata{}));
}

TEST(ChatFormat, GemmaTurns) {
  Options o;
  o.format = Format::gemma;
  o.system_prompt = "Be brief.";
  EXPECT_EQ(render_user_turn(o, "Hi", true, false),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render_user_turn(o, "More", false, true),
            "<end_of_turn>\n<start_of_turn>user\nMore<end_of_turn>\n<start_of_turn>model\n");
  const auto markers = control_markers(o);
  EXPECT_EQ(markers, (std::vector<std::string_view>{"<start_of_turn>", "<end_of_turn>"}));
}

TEST(ChatFormat, Gemma4Turns) {
  Options o;
  o.format = Format::gemma4;
  o.system_prompt = "Be brief.";
  EXPECT_EQ(render_user_turn(o, "Hi", true, false),
            "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_EQ(render_user_turn(o, "More", false, true),
            "<turn|>\n<|turn>user\nMore<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

TEST(ChatFormat, ChatMLTurns) {
  Options o;
  o.format = Format::chatml;
  o.system_prompt = "Be brief.";
  EXPECT_EQ(render_user_turn(o, "Hi", true, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  o.no_think = true;
  EXPECT_EQ(render_user_turn(o, "More", false, true),
            "<|im_end|>\n<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatFormat, HarmonyNoThinkGoesToTheFinalChannel) {
  Options o;
  o.format = Format::harmony;
  o.no_think = true;
  const auto s = render_user_turn(o, "Hi", true, false);
  EXPECT_EQ(s.rfind("<|start|>system<|message|>", 0), 0u);
  EXPECT_NE(s.find("<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>"), std::string::npos);
  EXPECT_EQ(render_user_turn(o, "Again", false, true).rfind("<|end|><|start|>user", 0), 0u);
}

TEST(ChatFormat, MistralInstruction) {
  Options o;
  o.format = Format::mistral;
  EXPECT_EQ(render_user_turn(o, "Hi", true, false), "[INST] Hi [/INST]");
  EXPECT_EQ(render_user_turn(o, "And?", false, true), "</s>[INST] And? [/INST]");
}

}  // namespace
}  // namespace moetier::chat
