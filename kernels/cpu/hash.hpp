// Counter-based hashing shared by weight generation, PLE n-grams and sampling: pure 64-bit
// integer mixing, so a GPU reproduces every value bit for bit.
#pragma once

#include <cstdint>

namespace ordo::cpu {

// splitmix64 finaliser of x + golden gamma.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Hash of a (key, a, b) triple, e.g. (seed, tensor id, element index).
inline uint64_t hash3(uint64_t key, uint64_t a, uint64_t b) {
  return mix64(mix64(mix64(key) ^ a) ^ b);
}

// Uniform in [0, 1) from the top 24 bits: exact in float, so identical on every device.
inline float uniform01(uint64_t h) {
  return static_cast<float>(static_cast<uint32_t>(h >> 40)) * (1.0f / 16777216.0f);
}

// Uniform in [-1, 1).
inline float uniform_pm1(uint64_t h) { return uniform01(h) * 2.0f - 1.0f; }

} // namespace ordo::cpu
