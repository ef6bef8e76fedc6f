// Prefix hashing (SPEC B1, DESIGN §4): an xxh64 chain over full blocks,
// hash_i = xxh64(parent_{i-1} as 8 bytes LE ‖ the block's token ids as int32 LE
//                ‖ for each media span overlapping the block, in offset order:
//                  span hash as 8 bytes LE ‖ offset as 4 bytes LE ‖ length as 4 bytes LE),
// whose root is seeded by the namespace and the tenant's cache_salt. Only full blocks are hashed.
// A block no span overlaps hashes exactly as without media, so blocks before the first span are
// shared with a text-only request; from the first overlapped block on, the chain differs for
// different media or the same media at another offset (the tokens are only placeholders).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/request.hpp"

namespace ordo {

// Root of the chain for one namespace and salt.
uint64_t prefix_root(uint64_t namespace_id, const std::string& cache_salt);

// Hashes of the first floor(num_tokens / block_size) full blocks of `tokens` (num_tokens ≤ size),
// with `media` (the request's spans, any order; empty for text only) folded in.
std::vector<uint64_t> prefix_hashes(uint64_t root, const std::vector<int32_t>& tokens,
                                    const std::vector<media_span>& media, int32_t block_size,
                                    size_t num_tokens);

// Extends `hashes` (already covering hashes.size() blocks of `tokens` and the same `media`) with
// every further full block of the first `num_tokens` tokens.
void extend_prefix_hashes(uint64_t root, const std::vector<int32_t>& tokens,
                          const std::vector<media_span>& media, int32_t block_size,
                          size_t num_tokens, std::vector<uint64_t>& hashes);

// Folds one sampled row's logits digest into a request's running logits digest.
uint64_t chain_digest(uint64_t running, uint64_t row_digest);

// xxh64 of a canonical description (namespace digests, config digests).
uint64_t digest_of(const std::string& canonical);

} // namespace ordo
