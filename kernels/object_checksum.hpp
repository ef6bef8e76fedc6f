// The object checksum's arithmetic (runtime/checksum.hpp), shared by the host, the CPU device's
// unit_copy and the GPU's: the object's bytes as little-endian 8-byte words w_i (the last one
// zero-padded), each word's term mix(w_i + (i + 1) · odd) added modulo 2^64, so any thread may
// add any word's term in any order (a copy kernel adds those of the words it moves) and the sum is
// the same; the checksum is mix(sum + mix(bytes)). mix is splitmix64's finaliser, a bijection:
// one changed word always changes its term, and a word moved to another index gets another term.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define ORDO_CHECKSUM_HD __host__ __device__
#else
#define ORDO_CHECKSUM_HD
#endif

namespace ordo {

inline constexpr uint64_t checksum_index_step = 0x9e3779b97f4a7c15ull;

ORDO_CHECKSUM_HD inline uint64_t checksum_mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ull;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The term of word `index` (byte offset / 8 in the object) holding `word`.
ORDO_CHECKSUM_HD inline uint64_t checksum_term(uint64_t word, uint64_t index) {
  return checksum_mix(word + (index + 1) * checksum_index_step);
}

// The checksum of an object of `bytes` bytes whose word terms add up to `sum` (mod 2^64).
ORDO_CHECKSUM_HD inline uint64_t checksum_finish(uint64_t sum, uint64_t bytes) {
  return checksum_mix(sum + checksum_mix(bytes));
}

// The sum (mod 2^64) of the word terms of `bytes` host bytes whose first word has index first_word
// (their byte offset / 8 in the object); bytes past a multiple of 8 form a zero-padded last word.
inline uint64_t checksum_terms(const uint8_t* data, size_t bytes, uint64_t first_word) {
  uint64_t sum = 0;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8); // little endian, as every target ordo builds for
    sum += checksum_term(w, first_word + i / 8);
  }
  if (i < bytes) {
    uint64_t w = 0;
    std::memcpy(&w, data + i, bytes - i);
    sum += checksum_term(w, first_word + i / 8);
  }
  return sum;
}

} // namespace ordo
