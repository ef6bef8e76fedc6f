#include "runtime/prefix_hash.hpp"

#include <algorithm>

#include <xxhash.h>

namespace ordo {

namespace {

void put_le64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(v >> (8 * i));
}

void put_le32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

} // namespace

uint64_t prefix_root(uint64_t namespace_id, const std::string& cache_salt) {
  std::vector<uint8_t> bytes(8 + cache_salt.size());
  put_le64(bytes.data(), namespace_id);
  for (size_t i = 0; i < cache_salt.size(); ++i)
    bytes[8 + i] = static_cast<uint8_t>(cache_salt[i]);
  return XXH64(bytes.data(), bytes.size(), 0);
}

void extend_prefix_hashes(uint64_t root, const std::vector<int32_t>& tokens,
                          const std::vector<media_span>& media, int32_t block_size,
                          size_t num_tokens, std::vector<uint64_t>& hashes) {
  size_t num_full = std::min(num_tokens, tokens.size()) / static_cast<size_t>(block_size);
  if (hashes.size() >= num_full)
    return;
  // Spans in offset order (the API sorts them; a trace or a test may not), empty ones dropped.
  std::vector<media_span> spans;
  for (const auto& s : media)
    if (s.length > 0)
      spans.push_back(s);
  std::stable_sort(spans.begin(), spans.end(),
                   [](const media_span& a, const media_span& b) { return a.offset < b.offset; });
  const size_t token_bytes = 8 + 4 * static_cast<size_t>(block_size);
  std::vector<uint8_t> buf(token_bytes);
  for (size_t b = hashes.size(); b < num_full; ++b) {
    buf.resize(token_bytes);
    put_le64(buf.data(), b == 0 ? root : hashes[b - 1]);
    for (int32_t i = 0; i < block_size; ++i) {
      auto t = static_cast<uint32_t>(tokens[b * block_size + i]);
      for (int k = 0; k < 4; ++k)
        buf[8 + 4 * i + k] = static_cast<uint8_t>(t >> (8 * k));
    }
    const int64_t begin = static_cast<int64_t>(b) * block_size, end = begin + block_size;
    for (const auto& s : spans)
      if (s.offset < end && int64_t{s.offset} + s.length > begin) {
        buf.resize(buf.size() + 8);
        put_le64(buf.data() + buf.size() - 8, s.hash);
        put_le32(buf, static_cast<uint32_t>(s.offset));
        put_le32(buf, static_cast<uint32_t>(s.length));
      }
    hashes.push_back(XXH64(buf.data(), buf.size(), 0));
  }
}

std::vector<uint64_t> prefix_hashes(uint64_t root, const std::vector<int32_t>& tokens,
                                    const std::vector<media_span>& media, int32_t block_size,
                                    size_t num_tokens) {
  std::vector<uint64_t> hashes;
  extend_prefix_hashes(root, tokens, media, block_size, num_tokens, hashes);
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
