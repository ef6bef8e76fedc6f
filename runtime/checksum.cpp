#include "runtime/checksum.hpp"

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "kernels/object_checksum.hpp"
#include "runtime/worker_pool.hpp"

namespace ordo {

namespace {

// Worker threads kept for the process's lifetime, so a checksum of a few MiB does not pay for
// starting threads; the caller works on it too.
worker_pool& pool() {
  static worker_pool p(static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())) - 1));
  return p;
}

} // namespace

uint64_t object_checksum(const uint8_t* data, size_t bytes, unsigned max_threads) {
  const size_t pieces = std::max<size_t>(1, (bytes + checksum_piece_bytes - 1) / checksum_piece_bytes);
  std::vector<uint64_t> sums(pieces);
  std::function<void(size_t)> sum_piece = [&](size_t i) {
    const size_t begin = i * checksum_piece_bytes;
    sums[i] = checksum_terms(data + begin, std::min(checksum_piece_bytes, bytes - std::min(bytes, begin)),
                             begin / 8);
  };
  unsigned threads = max_threads ? max_threads : pool().size() + 1;
  threads = static_cast<unsigned>(std::min<size_t>(threads, pieces / 2)); // a thread per 2+ pieces
  if (threads <= 1) {
    for (size_t i = 0; i < pieces; ++i)
      sum_piece(i);
  } else {
    pool().for_each_index(pieces, threads - 1, sum_piece);
  }
  uint64_t sum = 0;
  for (uint64_t s : sums)
    sum += s;
  return checksum_finish(sum, bytes);
}

} // namespace ordo
