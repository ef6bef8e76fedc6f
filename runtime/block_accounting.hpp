// The block pool's core: page (block) allocation with refcounts, the HBM prefix index
// (hash → block), LRU eviction of indexed blocks no request holds, and per-request block tables.
// Pure data in, pure data out: the block_pool actor calls apply() once per pool_step.
//
// A block is in exactly one of three states:
//   free    — no holder, not indexed            (on the free list)
//   cached  — no holder, indexed under a hash   (on the LRU list, evictable)
//   held    — refcount > 0, indexed or not
// NOTE(share): a prefix hit takes held or cached blocks by hash and increments their refcount;
// blocks are never copied.
// NOTE(alloc): fresh blocks come from the free list first, then by evicting the least recently
// released cached block, then the least recently used READY unpinned state image.
//
// State images (hybrid checkpoints) live in page units: blocks taken out of the pool, filed
// under the hash of the block that ends at the image's boundary.
//   COPYING (owned by the request whose forward reaches the boundary) ──images_ready──► READY
//   READY ──pinned by a restore──► READY (pinned) ──unpin──► READY (on the image LRU)
//   evicted: with its block (block eviction), as LRU victim, by evict_hbm, or (COPYING) when its
//   owner is released. Its units go back to the free list and into `clears` of the reply.
// NOTE(pins): a pinned or COPYING image is never evicted, nor is the block it is filed under.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "messages/pool.hpp"

namespace ordo {

class block_accounting {
public:
  block_accounting(int32_t num_blocks, int32_t block_size);

  // Applies the step in the order messages/pool.hpp gives (commits before releases, then
  // eviction, then grows).
  pool_step_done apply(const pool_step& step);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_cached() const { return static_cast<int32_t>(lru_.size()); }
  int32_t num_held() const { return num_blocks() - num_free() - num_cached(); }
  int32_t num_images() const { return static_cast<int32_t>(images_.size()); }
  // Blocks a grow could get now: free, evictable cached, and units of idle READY images.
  int32_t available() const;
  bool image_ready(uint64_t hash) const;
  int32_t image_pins(uint64_t hash) const;
  int32_t refcount(int32_t block) const { return blocks_[block].refs; }
  const std::vector<int32_t>* table(uint64_t request_id) const;
  // Length of the leading run of `hashes` present in the index.
  int32_t match_length(const std::vector<uint64_t>& hashes) const;

  // Checks every internal invariant; returns a description of the first violation or "".
  std::string check_invariants() const;

private:
  struct block_state {
    int32_t refs = 0;
    bool indexed = false;
    bool unit = false; // held as a page unit of a state image
    uint64_t hash = 0;
    std::list<int32_t>::iterator lru_pos;
  };
  struct image_state {
    std::vector<int32_t> units;
    bool ready = false;
    uint64_t owner = 0; // the request that copies it, while COPYING
    std::unordered_map<uint64_t, int32_t> pins; // request → pins
    bool on_lru = false;
    std::list<uint64_t>::iterator lru_pos;
  };

  void release(uint64_t request_id);
  void commit(const block_commit& c);
  void mark_ready(uint64_t hash);
  void unpin(uint64_t request_id, uint64_t hash);
  int32_t evict_all_cached();
  grow_result grow(const block_grow& g);
  void hold(int32_t block);
  void unhold(int32_t block);
  bool take_fresh(int32_t& block);
  bool evictable_block(int32_t block) const;
  void evict_block(int32_t block);
  void evict_image(uint64_t hash);
  void image_to_lru_if_idle(uint64_t hash);

  std::vector<block_state> blocks_;
  std::list<int32_t> free_; // FIFO: the oldest freed block is reused first
  std::list<int32_t> lru_;  // front = least recently released
  std::unordered_map<uint64_t, int32_t> index_;
  std::unordered_map<uint64_t, std::vector<int32_t>> tables_;
  std::unordered_map<uint64_t, std::vector<int32_t>> load_units_; // request → private image units
  int32_t block_size_;
  std::unordered_map<uint64_t, image_state> images_;
  std::list<uint64_t> image_lru_; // READY unpinned images, front = least recently used
  std::vector<int32_t> clears_;   // units given back during the current apply()
  int32_t images_evicted_ = 0;    // during the current apply()
};

} // namespace ordo
