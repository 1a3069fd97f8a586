#include "quant/repack.h"

#include <cassert>
#include <cstring>

#include "quant/blocks.h"

namespace moetier::quant {

bool rows16_layout_fits(GgmlType type, int64_t rows, int64_t cols) {
  return type == GgmlType::Q8_0 && rows > 0 && rows % kRows16 == 0 && cols > 0 && cols % kQK == 0;
}

void repack_rows16(GgmlType type, const uint8_t* src, size_t row_bytes, int64_t cols, int64_t g0, int64_t g1,
                   uint8_t* dst) {
  assert(type == GgmlType::Q8_0 && cols % kQK == 0 && g0 <= g1 &&
         row_bytes == static_cast<size_t>(cols / kQK) * sizeof(BlockQ8_0));
  (void)type;
  (void)row_bytes;
  const int64_t nb = cols / kQK;
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* out = dst + static_cast<size_t>(g * nb) * kRows16BlockBytes;
    for (int64_t b = 0; b < nb; ++b, out += kRows16BlockBytes) {
      for (int64_t l = 0; l < kRows16; ++l) {
        BlockQ8_0 blk;
        const size_t at = static_cast<size_t>(g * kRows16 + l) * row_bytes + static_cast<size_t>(b) * sizeof blk;
        std::memcpy(&blk, src + at, sizeof blk);
        std::memcpy(out + 2 * l, &blk.d, 2);
        for (int q = 0; q < kQK / 4; ++q) {
          for (int j = 0; j < 4; ++j) {
            out[32 + 64 * q + 4 * l + j] = static_cast<uint8_t>(static_cast<uint8_t>(blk.qs[4 * q + j]) ^ 0x80u);
          }
        }
      }
    }
  }
}

}  // namespace moetier::quant
