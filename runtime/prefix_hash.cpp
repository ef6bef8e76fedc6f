#include "runtime/prefix_hash.hpp"

#include <algorithm>

#include <xxhash.h>

namespace ordo {

namespace {

void put_le64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(v >> (8 * i));
}

} // namespace

uint64_t prefix_root(uint64_t namespace_id, const std::string& cache_salt) {
  std::vector<uint8_t> bytes(8 + cache_salt.size());
  put_le64(bytes.data(), namespace_id);
  for (size_t i = 0; i < cache_salt.size(); ++i)
    bytes[8 + i] = static_cast<uint8_t>(cache_salt[i]);
  return XXH64(bytes.data(), bytes.size(), 0);
}

void extend_prefix_hashes(uint64_t root, const std::vector<int32_t>& tokens, int32_t block_size,
                          size_t num_tokens, std::vector<uint64_t>& hashes) {
  size_t num_full = std::min(num_tokens, tokens.size()) / static_cast<size_t>(block_size);
  std::vector<uint8_t> buf(8 + 4 * static_cast<size_t>(block_size));
  for (size_t b = hashes.size(); b < num_full; ++b) {
    put_le64(buf.data(), b == 0 ? root : hashes[b - 1]);
    for (int32_t i = 0; i < block_size; ++i) {
      auto t = static_cast<uint32_t>(tokens[b * block_size + i]);
      for (int k = 0; k < 4; ++k)
        buf[8 + 4 * i + k] = static_cast<uint8_t>(t >> (8 * k));
    }
    hashes.push_back(XXH64(buf.data(), buf.size(), 0));
  }
}

std::vector<uint64_t> prefix_hashes(uint64_t root, const std::vector<int32_t>& tokens, int32_t block_size,
                                    size_t num_tokens) {
  std::vector<uint64_t> hashes;
  extend_prefix_hashes(root, tokens, block_size, num_tokens, hashes);
  return hashes;
}

uint64_t chain_digest(uint64_t running, uint64_t row_digest) {
  uint8_t bytes[16];
  put_le64(bytes, running);
  put_le64(bytes + 8, row_digest);
  return XXH64(bytes, sizeof bytes, 0);
}

uint64_t digest_of(const std::string& canonical) {
  return XXH64(canonical.data(), canonical.size(), 0);
}

} // namespace ordo
