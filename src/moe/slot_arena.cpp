#include "moe/slot_arena.h"

#include <cassert>

namespace moetier::moe {

SlotArena::SlotArena(uint64_t slot_bytes, int64_t n_cache, int64_t n_working, int64_t n_ahead)
    : buf_(slot_bytes * static_cast<uint64_t>(n_cache + n_working + n_ahead), "expert cache"),
      slot_bytes_(slot_bytes),
      n_cache_(n_cache),
      n_working_(n_working),
      n_ahead_(n_ahead) {
  assert(slot_bytes % io::kPage == 0 && n_cache >= 0 && n_working >= 0 && n_ahead >= 0);
}

}  // namespace moetier::moe
