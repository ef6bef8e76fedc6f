// Prefix-stable test prompts of byte tokens, shared by `ordo topo` ({ tokens, seed }) and
// `ordo bench pd`: token i of (tokens, seed) depends on (seed, i) only, so the first n tokens of a
// longer prompt equal the prompt (n, seed), and different seeds share no prefix block in practice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ordo {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::vector<int32_t> seeded_prompt(int64_t tokens, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  const uint64_t base = splitmix64(seed);
  for (int64_t i = 0; i < tokens; ++i)
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(splitmix64(base ^ static_cast<uint64_t>(i)) % 256);
  return ids;
}

} // namespace ordo
