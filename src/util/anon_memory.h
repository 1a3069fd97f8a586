// Anonymous memory for the large, long-lived buffers the engine owns: the repacked weights (quant/
// repacked_matrices.h), the expert cache's slots and the dense weights' copy (moe/io/anon_buffer.h).
//
// mmap(MAP_PRIVATE | MAP_ANONYMOUS): page-aligned (what O_DIRECT needs), committed lazily by the kernel on first
// write, returned to the system only by unmap_anonymous. A buffer of at least 2 MiB starts on a 2 MiB boundary and is
// advised MADV_HUGEPAGE, so that where transparent huge pages are enabled ("always" or "madvise" in
// /sys/kernel/mm/transparent_hugepage/enabled: both honour the advice) the kernel backs its whole 2 MiB extents with
// huge pages: the first write to each costs one fault instead of 512, and the repacked weights and cached experts a
// decode step reads take a 512th of the TLB entries. Where they are disabled, or the kernel finds no free 2 MiB page,
// small pages serve as before; nothing depends on it but speed. (The dense weights' copy is moved onto the model's
// mapping at an address not 2 MiB-aligned, which splits its huge pages again: it keeps only the fewer faults while
// it is read.) Measured in docs/design.md ("Huge pages").
#pragma once

#include <cstddef>
#include <cstdint>

namespace moetier::util {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64 and arm64 (4 KiB granule) PMD size

// `bytes` (> 0) of zero-filled memory, rounded up to whole pages. Throws moetier::Error naming `what` ("expert
// cache", "repacked weights"), the size and the system's reason when the mapping fails.
uint8_t* map_anonymous(size_t bytes, const char* what);
// Releases memory from map_anonymous; `bytes` as given to it. No-op for nullptr.
void unmap_anonymous(uint8_t* p, size_t bytes);

}  // namespace moetier::util
