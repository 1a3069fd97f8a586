// The type table: ids and block geometry against ggml's block structs, lookups and name parsing, and that the
// can_dequantize flag agrees with what dequantize_row_ref actually accepts.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant/dequant_ref.h"
#include "quant/ggml_type.h"
#include "util/error.h"

namespace moetier::quant {
namespace {

struct Expected {
  uint32_t id;
  const char* name;
  int64_t block;
  size_t bytes;
};

// Sizes derived by hand from ggml-common.h (QK_K = 256, ggml_half = 2 bytes), independently of the table.
const std::vector<Expected> kExpected = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},
    {2, "Q4_0", 32, 2 + 16},  {3, "Q4_1", 32, 2 + 2 + 16},
    {6, "Q5_0", 32, 2 + 4 + 16}, {7, "Q5_1", 32, 2 + 2 + 4 + 16},
    {8, "Q8_0", 32, 2 + 32},  {9, "Q8_1", 32, 2 + 2 + 32},
    {10, "Q2_K", 256, 16 + 64 + 2 + 2},        {11, "Q3_K", 256, 32 + 64 + 12 + 2},
    {12, "Q4_K", 256, 2 + 2 + 12 + 128},       {13, "Q5_K", 256, 2 + 2 + 12 + 32 + 128},
    {14, "Q6_K", 256, 128 + 64 + 16 + 2},      {15, "Q8_K", 256, 4 + 256 + 2 * 16},
    {16, "IQ2_XXS", 256, 2 + 64},              {17, "IQ2_XS", 256, 2 + 64 + 8},
    {18, "IQ3_XXS", 256, 2 + 64 + 32},         {19, "IQ1_S", 256, 2 + 32 + 16},
    {20, "IQ4_NL", 32, 2 + 16},                {21, "IQ3_S", 256, 2 + 64 + 8 + 32 + 4},
    {22, "IQ2_S", 256, 2 + 64 + 8 + 8},        {23, "IQ4_XS", 256, 2 + 2 + 4 + 128},
    {24, "I8", 1, 1},   {25, "I16", 1, 2},   {26, "I32", 1, 4},   {27, "I64", 1, 8},   {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 32 + 16 + 8},           {30, "BF16", 1, 2},
    {34, "TQ1_0", 256, 48 + 4 + 2},            {35, "TQ2_0", 256, 64 + 2},
    {39, "MXFP4", 32, 1 + 16},
};

TEST(GgmlType, TableMatchesGgmlBlockStructs) {
  EXPECT_EQ(all_types().size(), kExpected.size());
  for (const Expected& e : kExpected) {
    const auto tr = find_type(e.id);
    ASSERT_TRUE(tr.has_value()) << e.name;
    EXPECT_EQ(static_cast<uint32_t>(tr->type), e.id);
    EXPECT_EQ(type_name(tr->type), e.name);
    EXPECT_EQ(tr->block_size, e.block) << e.name;
    EXPECT_EQ(tr->type_size, e.bytes) << e.name;
    EXPECT_EQ(&traits(tr->type), &traits(tr->type));
    EXPECT_EQ(traits(tr->type).type, tr->type);
  }
}

TEST(GgmlType, UnknownIdsAreNullopt) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu})
    EXPECT_FALSE(find_type(id).has_value()) << id;
}

TEST(GgmlType, ParsesDisplayAndGgmlNames) {
  EXPECT_EQ(parse_type("Q4_K"), GgmlType::Q4_K);
  EXPECT_EQ(parse_type("q4_K"), GgmlType::Q4_K);
  EXPECT_EQ(parse_type("q4_k"), GgmlType::Q4_K);
  EXPECT_EQ(parse_type("mxfp4"), GgmlType::MXFP4);
  EXPECT_EQ(parse_type("IQ4_XS"), GgmlType::IQ4_XS);
  EXPECT_EQ(parse_type("bf16"), GgmlType::BF16);
  EXPECT_EQ(parse_type("F32"), GgmlType::F32);
  EXPECT_FALSE(parse_type("Q4_K_M").has_value());  // a file-type mix name, not a tensor type
  EXPECT_FALSE(parse_type("q4_2").has_value());
  EXPECT_FALSE(parse_type("").has_value());
  for (const TypeTraits& t : all_types()) {
    EXPECT_EQ(parse_type(t.name), t.type);
    EXPECT_EQ(parse_type(type_name(t.type)), t.type);
  }
}

TEST(GgmlType, RowBytes) {
  EXPECT_EQ(row_bytes(GgmlType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(GgmlType::Q4_K, 512), 288u);
  EXPECT_EQ(row_bytes(GgmlType::MXFP4, 2880), 90u * 17u);
  EXPECT_EQ(row_bytes(GgmlType::Q8_0, 0), 0u);
  EXPECT_THROW(row_bytes(GgmlType::Q4_K, 100), Error);
  try {
    row_bytes(GgmlType::Q6_K, 300);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q6_K"), std::string::npos) << e.what();
  }
}

// can_dequantize is what `inspect` and the loader use to refuse early; it must match the dispatcher exactly.
TEST(GgmlType, CanDequantizeFlagMatchesDispatcher) {
  for (const TypeTraits& t : all_types()) {
    std::vector<uint8_t> src(t.type_size * 2, 0);
    std::vector<float> dst(static_cast<size_t>(t.block_size) * 2);
    bool accepted = true;
    try {
      dequantize_row_ref(t.type, src.data(), dst.data(), t.block_size * 2);
    } catch (const Error&) {
      accepted = false;
    }
    EXPECT_EQ(accepted, t.can_dequantize) << type_name(t.type);
  }
}

TEST(GgmlType, RefusesUnsupportedTypesByName) {
  std::vector<uint8_t> src(1024, 0);
  std::vector<float> dst(256);
  try {
    dequantize_row_ref(GgmlType::IQ2_XXS, src.data(), dst.data(), 256);
    FAIL() << "IQ2_XXS was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "IQ2_XXS is not supported yet: moetier cannot compute tensors of this type");
  }
  for (GgmlType t : {GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                     GgmlType::IQ3_S, GgmlType::TQ1_0, GgmlType::TQ2_0, GgmlType::Q8_1, GgmlType::I32}) {
    try {
      dequantize_row_ref(t, src.data(), dst.data(), 256);
      FAIL() << type_name(t) << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(type_name(t)) + " is not supported yet"), std::string::npos)
          << e.what();
    }
  }
  // A raw id that is no ggml type at all (a corrupt file cast straight to the enum).
  try {
    dequantize_row_ref(static_cast<GgmlType>(5), src.data(), dst.data(), 32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("type id 5"), std::string::npos) << e.what();
  }
  // A partial block.
  EXPECT_THROW(dequantize_row_ref(GgmlType::Q4_0, src.data(), dst.data(), 31), Error);
}

}  // namespace
}  // namespace moetier::quant
