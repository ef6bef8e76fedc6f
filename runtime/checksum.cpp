#include "runtime/checksum.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#include <xxhash.h>

namespace ordo {

uint64_t object_checksum(const uint8_t* data, size_t bytes, unsigned max_threads) {
  const size_t pieces = std::max<size_t>(1, (bytes + checksum_piece_bytes - 1) / checksum_piece_bytes);
  std::vector<uint64_t> hashes(pieces);
  auto hash_from = [&](size_t first, size_t stride) {
    for (size_t i = first; i < pieces; i += stride) {
      size_t begin = i * checksum_piece_bytes;
      hashes[i] = XXH64(data + begin, std::min(checksum_piece_bytes, bytes - std::min(bytes, begin)), i);
    }
  };
  unsigned threads = max_threads ? max_threads : std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<unsigned>(std::min<size_t>(threads, pieces / 2)); // a thread per 2+ pieces
  if (threads <= 1) {
    hash_from(0, 1);
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
      pool.emplace_back(hash_from, t, threads);
    hash_from(0, threads);
    for (auto& th : pool)
      th.join();
  }
  std::vector<uint8_t> le(8 * pieces);
  for (size_t i = 0; i < pieces; ++i)
    for (int b = 0; b < 8; ++b)
      le[8 * i + static_cast<size_t>(b)] = static_cast<uint8_t>(hashes[i] >> (8 * b));
  return XXH64(le.data(), le.size(), bytes);
}

} // namespace ordo
