// Whole conversations in each chat format: a single user turn is exactly what `run --chat` renders, and
// history follows the models' own chat templates (Qwen3's and gpt-oss's tokenizer.chat_template in
// ../shared/tokenizer, Mixtral-8x7B-Instruct's tokenizer_config.json).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/conversation.h"
#include "util/error.h"

namespace moetier::chat {
namespace {

constexpr Format kFormats[] = {Format::chatml, Format::harmony, Format::mistral, Format::gemma, Format::gemma4};

Options options(Format f, std::string system = {}, bool no_think = false) {
  Options o;
  o.format = f;
  o.system_prompt = std::move(system);
  o.no_think = no_think;
  return o;
}

// The server's greedy output must equal `moetier run --chat`, which renders render_user_turn(first = true).
TEST(Conversation, OneUserMessageIsTheFirstTurnOfRunChat) {
  for (Format f : kFormats) {
    for (bool no_think : {false, true}) {
      SCOPED_TRACE(std::string(format_name(f)) + (no_think ? " no_think" : ""));
      const Options plain = options(f, {}, no_think);
      const std::vector<Message> user = {{Role::user, "What is 2+2?"}};
      EXPECT_EQ(render_conversation(plain, user), render_user_turn(plain, "What is 2+2?", true, false));

      const Options with_system = options(f, "Be brief.", no_think);
      EXPECT_EQ(render_conversation(with_system, user), render_user_turn(with_system, "What is 2+2?", true, false));
      // The system text as a message of the request instead of the option.
      const std::vector<Message> system_user = {{Role::system, "Be brief."}, {Role::user, "What is 2+2?"}};
      EXPECT_EQ(render_conversation(plain, system_user), render_user_turn(with_system, "What is 2+2?", true, false));
    }
  }
}

// A chat continued turn by turn as `run --chat` feeds it (the reply as generated, then the next turn closing it)
// is the same text as the whole conversation rendered at once: the server's KV cache prefix stays reusable.
TEST(Conversation, HistoryEqualsTheTurnsOfAnInteractiveChat) {
  struct Case {
    Format format;
    std::string generated;  // the reply's text as the model emits it after the assistant opening
  };
  for (const Case& c : {Case{Format::chatml, "Four."}, Case{Format::harmony, "<|channel|>final<|message|>Four."},
                        Case{Format::mistral, " Four."}, Case{Format::gemma, "Four."}}) {
    SCOPED_TRACE(std::string(format_name(c.format)));
    const Options o = options(c.format, "Be brief.");
    const std::string turns =
        render_user_turn(o, "2+2?", true, false) + c.generated + render_user_turn(o, "And 3+3?", false, true);
    const std::vector<Message> msgs = {{Role::user, "2+2?"}, {Role::assistant, "Four."}, {Role::user, "And 3+3?"}};
    EXPECT_EQ(render_conversation(o, msgs), turns);
  }
}

TEST(Conversation, ChatMLAsQwen3sTemplate) {
  const std::vector<Message> msgs = {
      {Role::system, "Be brief."},
      {Role::user, "Hi"},
      {Role::assistant, "<think>\nGreet back.\n</think>\n\nHello!"},  // history loses its think block
      {Role::user, "Bye"},
  };
  EXPECT_EQ(render_conversation(options(Format::chatml), msgs),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_conversation(options(Format::chatml, {}, true), std::vector<Message>{{Role::user, "Hi"}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(Conversation, HarmonyAsGptOssTemplate) {
  Options o = options(Format::harmony);
  o.reasoning_effort = "high";
  const std::vector<Message> msgs = {
      {Role::developer, "Answer in French."},
      {Role::user, "Hi"},
      {Role::assistant, "Bonjour !"},
      {Role::user, "Bye"},
  };
  EXPECT_EQ(render_conversation(o, msgs),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
            "2024-06\n\nReasoning: high\n\n# Valid channels: analysis, commentary, final. Channel must be included "
            "for every message.<|end|><|start|>developer<|message|># Instructions\n\nAnswer in French.\n\n<|end|>"
            "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Bonjour !<|end|>"
            "<|start|>user<|message|>Bye<|end|><|start|>assistant");
}

TEST(Conversation, MistralAsMixtralsTemplate) {
  const std::vector<Message> msgs = {
      {Role::system, "Be brief."}, {Role::user, "Hi"}, {Role::assistant, "Hello!"}, {Role::user, "Bye"}};
  EXPECT_EQ(render_conversation(options(Format::mistral), msgs),
            "[INST] Be brief.\n\nHi [/INST] Hello!</s>[INST] Bye [/INST]");
}

// Gemma 3's chat template (../shared/tokenizer/gemma3-vocab.gguf): the system text and a blank line open the first
// user turn, replies are "model" turns, every content is trimmed.
TEST(Conversation, GemmaAsGemma3sTemplate) {
  const std::vector<Message> msgs = {
      {Role::system, "Be brief."}, {Role::user, " Hi\n"}, {Role::assistant, "Hello!"}, {Role::user, "Bye"}};
  EXPECT_EQ(render_conversation(options(Format::gemma), msgs),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
}

// Gemma 4's template: a system turn, "model" replies without their thought channel, and the generation prompt's
// empty thought channel (thinking off, the template's default).
TEST(Conversation, Gemma4AsGemma4sTemplate) {
  const std::vector<Message> msgs = {{Role::system, "Be brief."},
                                     {Role::user, "Hi"},
                                     {Role::assistant, "<|channel>thought\n<channel|>Hello!"},
                                     {Role::user, "Bye"}};
  EXPECT_EQ(render_conversation(options(Format::gemma4), msgs),
            "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
            "<|turn>user\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

// Qwen3.5/3.6's template opens the think block in its generation prompt; enable_thinking=false still gives the
// empty block.
TEST(Conversation, ChatMLWhoseTemplateOpensTheThinkBlock) {
  Options o = options(Format::chatml);
  o.think_opens = true;
  const std::vector<Message> user = {{Role::user, "Hi"}};
  EXPECT_EQ(render_conversation(o, user), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(render_conversation(o, user), render_user_turn(o, "Hi", true, false));
  o.no_think = true;
  EXPECT_EQ(render_conversation(o, user),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(Conversation, SystemMessagesMergeInOrderAfterTheOption) {
  const std::vector<Message> msgs = {{Role::system, "One."}, {Role::user, "Hi"}, {Role::developer, "Two."},
                                     {Role::user, "Again"}};
  EXPECT_EQ(render_conversation(options(Format::chatml, "Zero."), msgs),
            "<|im_start|>system\nZero.\n\nOne.\n\nTwo.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Conversation, ReasoningEffortOnlyChangesHarmonysSystemLine) {
  Options o = options(Format::harmony);
  const std::string medium = render_user_turn(o, "Hi", true, false);
  EXPECT_NE(medium.find("\nReasoning: medium\n"), std::string::npos);
  o.reasoning_effort = "low";
  const std::string low = render_user_turn(o, "Hi", true, false);
  EXPECT_NE(low.find("\nReasoning: low\n"), std::string::npos);
  EXPECT_EQ(low.size() + 3, medium.size());
  o.reasoning_effort = "extreme";
  try {
    render_user_turn(o, "Hi", true, false);
    ADD_FAILURE() << "an unknown effort was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'extreme'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(render_conversation(o, std::vector<Message>{{Role::user, "Hi"}}), Error);
}

TEST(Conversation, RolesAndShapeErrors) {
  EXPECT_EQ(parse_role("system"), Role::system);
  EXPECT_EQ(parse_role("developer"), Role::developer);
  EXPECT_EQ(parse_role("user"), Role::user);
  EXPECT_EQ(parse_role("assistant"), Role::assistant);
  EXPECT_EQ(parse_role("tool"), std::nullopt);
  const Options o = options(Format::chatml);
  EXPECT_THROW(render_conversation(o, std::vector<Message>{}), Error);
  EXPECT_THROW(render_conversation(o, std::vector<Message>{{Role::system, "Be brief."}}), Error);
  EXPECT_THROW(render_conversation(o, std::vector<Message>{{Role::user, "Hi"}, {Role::assistant, "Hel"}}), Error);
}

}  // namespace
}  // namespace moetier::chat
