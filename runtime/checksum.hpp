// The host tier's object checksum (SPEC C6): a sum of per-word terms (kernels/object_checksum.hpp),
// so whoever moves the bytes can add them up in any order: the GPU's gather and scatter compute it
// from the bytes they copy, and the host computes the same value here. Large objects are summed by
// several threads, in pieces of `checksum_piece_bytes` (256 KiB); the value does not depend on how
// many threads computed it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ordo {

inline constexpr size_t checksum_piece_bytes = size_t{256} << 10;

// Uses up to `max_threads` threads (0 = one per hardware thread, at most 8: the caller and
// workers kept for the process's lifetime) when the data has several pieces. Thread-safe:
// concurrent callers take turns.
uint64_t object_checksum(const uint8_t* data, size_t bytes, unsigned max_threads = 0);

} // namespace ordo
