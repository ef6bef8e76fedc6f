#include "runtime/block_accounting.hpp"

#include <algorithm>
#include <iterator>

namespace ordo {

block_accounting::block_accounting(int32_t num_blocks) : blocks_(static_cast<size_t>(num_blocks)) {
  for (int32_t b = 0; b < num_blocks; ++b)
    free_.push_back(b);
}

const std::vector<int32_t>* block_accounting::table(uint64_t request_id) const {
  auto it = tables_.find(request_id);
  return it == tables_.end() ? nullptr : &it->second;
}

int32_t block_accounting::match_length(const std::vector<uint64_t>& hashes) const {
  int32_t n = 0;
  while (n < static_cast<int32_t>(hashes.size()) && index_.count(hashes[n]))
    ++n;
  return n;
}

pool_step_done block_accounting::apply(const pool_step& step) {
  pool_step_done done;
  done.header = step.header;
  for (auto id : step.releases)
    release(id);
  for (const auto& c : step.commits)
    commit(c);
  if (step.evict_hbm)
    done.num_evicted = evict_all_cached();
  for (const auto& g : step.grows)
    done.results.push_back(grow(g));
  done.num_free = num_free();
  done.num_cached = num_cached();
  return done;
}

void block_accounting::hold(int32_t block) {
  auto& s = blocks_[block];
  if (s.refs == 0 && s.indexed)
    lru_.erase(s.lru_pos);
  ++s.refs;
}

void block_accounting::unhold(int32_t block) {
  auto& s = blocks_[block];
  if (--s.refs > 0)
    return;
  if (s.indexed) {
    lru_.push_back(block);
    s.lru_pos = std::prev(lru_.end());
  } else {
    free_.push_back(block);
  }
}

void block_accounting::release(uint64_t request_id) {
  auto it = tables_.find(request_id);
  if (it == tables_.end())
    return;
  for (auto b : it->second)
    unhold(b);
  tables_.erase(it);
}

void block_accounting::commit(const block_commit& c) {
  auto it = tables_.find(c.request_id);
  if (it == tables_.end() || c.block_index < 0 || c.block_index >= static_cast<int32_t>(it->second.size()))
    return; // the request was released in this step: nothing to index
  int32_t block = it->second[c.block_index];
  auto& s = blocks_[block];
  if (s.indexed || index_.count(c.hash))
    return; // already indexed (a shared hit), or another block holds the same content
  s.indexed = true;
  s.hash = c.hash;
  index_.emplace(c.hash, block);
}

int32_t block_accounting::evict_all_cached() {
  int32_t n = 0;
  while (!lru_.empty()) {
    int32_t b = lru_.front();
    lru_.pop_front();
    index_.erase(blocks_[b].hash);
    blocks_[b].indexed = false;
    free_.push_back(b);
    ++n;
  }
  return n;
}

bool block_accounting::take_fresh(int32_t& block) {
  if (!free_.empty()) {
    block = free_.front();
    free_.pop_front();
  } else if (!lru_.empty()) {
    block = lru_.front();
    lru_.pop_front();
    index_.erase(blocks_[block].hash);
    blocks_[block].indexed = false;
  } else {
    return false;
  }
  blocks_[block].refs = 1;
  return true;
}

grow_result block_accounting::grow(const block_grow& g) {
  grow_result r;
  r.request_id = g.request_id;
  auto it = tables_.find(g.request_id);
  bool is_new = it == tables_.end();
  std::vector<int32_t> table = is_new ? std::vector<int32_t>{} : it->second;
  size_t held_before = table.size();
  if (is_new) {
    int32_t limit = std::min<int32_t>(g.max_hit_blocks, static_cast<int32_t>(g.hashes.size()));
    for (int32_t i = 0; i < limit && static_cast<int32_t>(table.size()) < g.total_blocks; ++i) {
      auto hit = index_.find(g.hashes[i]);
      if (hit == index_.end())
        break;
      hold(hit->second);
      table.push_back(hit->second);
    }
    r.num_hit_blocks = static_cast<int32_t>(table.size());
  }
  auto need = static_cast<size_t>(std::max<int32_t>(0, g.total_blocks - static_cast<int32_t>(table.size())));
  if (need > static_cast<size_t>(num_free() + num_cached())) {
    for (size_t i = held_before; i < table.size(); ++i)
      unhold(table[i]); // all or nothing: give back this grow's hits
    r.ok = false;
    r.num_hit_blocks = 0;
    r.block_table = is_new ? std::vector<int32_t>{} : it->second;
    return r;
  }
  for (size_t i = 0; i < need; ++i) {
    int32_t b = -1;
    take_fresh(b);
    table.push_back(b);
  }
  r.ok = true;
  r.block_table = table;
  tables_[g.request_id] = std::move(table);
  return r;
}

std::string block_accounting::check_invariants() const {
  std::vector<int32_t> refs(blocks_.size(), 0);
  for (const auto& [id, table] : tables_)
    for (auto b : table)
      ++refs[b];
  for (size_t b = 0; b < blocks_.size(); ++b)
    if (refs[b] != blocks_[b].refs)
      return "block " + std::to_string(b) + " refcount " + std::to_string(blocks_[b].refs) + " but held " +
             std::to_string(refs[b]) + " times";
  std::vector<int> on_list(blocks_.size(), 0);
  for (auto b : free_) {
    if (blocks_[b].refs || blocks_[b].indexed)
      return "free block " + std::to_string(b) + " is held or indexed";
    ++on_list[b];
  }
  for (auto b : lru_) {
    if (blocks_[b].refs || !blocks_[b].indexed)
      return "cached block " + std::to_string(b) + " is held or not indexed";
    ++on_list[b];
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    int expected = blocks_[b].refs == 0 ? 1 : 0;
    if (on_list[b] != expected)
      return "block " + std::to_string(b) + " is on " + std::to_string(on_list[b]) + " lists";
  }
  for (const auto& [hash, b] : index_)
    if (!blocks_[b].indexed || blocks_[b].hash != hash)
      return "index entry for block " + std::to_string(b) + " does not match the block";
  return {};
}

} // namespace ordo
