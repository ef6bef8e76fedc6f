// The host tier's object checksum (SPEC C6): an xxh64 tree, so large objects are hashed by
// several threads. The data is cut into pieces of `checksum_piece_bytes` (256 KiB; the last may be
// shorter); piece i hashes to xxh64(piece, seed i), and the checksum is xxh64 of the piece hashes
// (8 bytes little endian each, in order) with the data's length as seed. The value does not
// depend on how many threads computed it.
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
