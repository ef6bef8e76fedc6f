#include "runtime/block_accounting.hpp"

#include <algorithm>
#include <iterator>

namespace ordo {

block_accounting::block_accounting(int32_t num_blocks, int32_t block_size)
    : blocks_(static_cast<size_t>(num_blocks)), block_size_(block_size) {
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

bool block_accounting::image_ready(uint64_t hash) const {
  auto it = images_.find(hash);
  return it != images_.end() && it->second.ready;
}

int32_t block_accounting::image_pins(uint64_t hash) const {
  auto it = images_.find(hash);
  if (it == images_.end())
    return 0;
  int32_t n = 0;
  for (const auto& [id, count] : it->second.pins)
    n += count;
  return n;
}

pool_step_done block_accounting::apply(const pool_step& step) {
  pool_step_done done;
  done.header = step.header;
  clears_.clear();
  images_evicted_ = 0;
  for (auto hash : step.images_ready)
    mark_ready(hash);
  for (const auto& u : step.unpins)
    unpin(u.request_id, u.hash);
  for (const auto& a : step.image_aborts)
    if (auto it = images_.find(a.hash); it != images_.end() && !it->second.ready && it->second.owner == a.request_id)
      evict_image(a.hash);
  // Commits before releases: a finishing request's last full blocks still enter the index.
  for (const auto& c : step.commits)
    commit(c);
  for (auto id : step.releases)
    release(id);
  if (step.evict_hbm)
    done.num_evicted = evict_all_cached();
  for (const auto& g : step.grows)
    done.results.push_back(grow(g));
  done.num_free = num_free();
  done.num_cached = num_cached();
  done.clears = clears_;
  done.num_images_evicted = images_evicted_;
  done.num_images = num_images();
  done.num_available = available();
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

void block_accounting::image_to_lru_if_idle(uint64_t hash) {
  auto& img = images_.at(hash);
  if (img.ready && img.pins.empty() && !img.on_lru) {
    image_lru_.push_back(hash);
    img.lru_pos = std::prev(image_lru_.end());
    img.on_lru = true;
  }
}

void block_accounting::evict_image(uint64_t hash) {
  auto it = images_.find(hash);
  if (it == images_.end())
    return;
  if (it->second.on_lru)
    image_lru_.erase(it->second.lru_pos);
  for (auto u : it->second.units) {
    blocks_[u].refs = 0;
    blocks_[u].unit = false;
    free_.push_back(u);
    clears_.push_back(u); // NOTE(clear): written again only after the plan carrying this clear
  }
  images_.erase(it);
  ++images_evicted_;
}

void block_accounting::mark_ready(uint64_t hash) {
  auto it = images_.find(hash);
  if (it == images_.end() || it->second.ready)
    return;
  it->second.ready = true;
  it->second.owner = 0;
  image_to_lru_if_idle(hash);
}

void block_accounting::unpin(uint64_t request_id, uint64_t hash) {
  auto it = images_.find(hash);
  if (it == images_.end())
    return;
  auto pin = it->second.pins.find(request_id);
  if (pin == it->second.pins.end())
    return;
  if (--pin->second == 0)
    it->second.pins.erase(pin);
  image_to_lru_if_idle(hash);
}

void block_accounting::release(uint64_t request_id) {
  auto it = tables_.find(request_id);
  if (it != tables_.end()) {
    for (auto b : it->second)
      unhold(b);
    tables_.erase(it);
  }
  if (auto lu = load_units_.find(request_id); lu != load_units_.end()) {
    for (auto u : lu->second) {
      blocks_[u].refs = 0;
      blocks_[u].unit = false;
      free_.push_back(u);
      clears_.push_back(u);
    }
    load_units_.erase(lu);
  }
  std::vector<uint64_t> aborted, unpinned;
  for (auto& [hash, img] : images_) {
    if (!img.ready && img.owner == request_id)
      aborted.push_back(hash); // its boundary was never reached
    else if (img.pins.count(request_id))
      unpinned.push_back(hash);
  }
  for (auto hash : aborted)
    evict_image(hash);
  for (auto hash : unpinned) {
    images_.at(hash).pins.erase(request_id);
    image_to_lru_if_idle(hash);
  }
}

void block_accounting::commit(const block_commit& c) {
  auto it = tables_.find(c.request_id);
  if (it == tables_.end() || c.block_index < 0 || c.block_index >= static_cast<int32_t>(it->second.size()))
    return; // unknown request or block: nothing to index
  int32_t block = it->second[c.block_index];
  auto& s = blocks_[block];
  if (s.indexed || index_.count(c.hash))
    return; // already indexed (a shared hit), or another block holds the same content
  s.indexed = true;
  s.hash = c.hash;
  index_.emplace(c.hash, block);
}

bool block_accounting::evictable_block(int32_t block) const {
  auto img = images_.find(blocks_[block].hash);
  return img == images_.end() || (img->second.ready && img->second.pins.empty());
}

void block_accounting::evict_block(int32_t block) {
  auto& s = blocks_[block];
  lru_.erase(s.lru_pos);
  index_.erase(s.hash);
  s.indexed = false;
  evict_image(s.hash); // NOTE(follow): an image follows its block's eviction
  free_.push_back(block);
}

int32_t block_accounting::evict_all_cached() {
  int32_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    int32_t b = *it++;
    if (!evictable_block(b))
      continue;
    evict_block(b);
    ++n;
  }
  while (!image_lru_.empty())
    evict_image(image_lru_.front());
  return n;
}

int32_t block_accounting::available() const {
  int32_t n = num_free();
  for (auto b : lru_)
    n += evictable_block(b) ? 1 : 0;
  for (auto hash : image_lru_)
    n += static_cast<int32_t>(images_.at(hash).units.size());
  return n;
}

bool block_accounting::take_fresh(int32_t& block) {
  for (;;) {
    if (!free_.empty()) {
      block = free_.front();
      free_.pop_front();
      blocks_[block].refs = 1;
      return true;
    }
    auto victim = std::find_if(lru_.begin(), lru_.end(), [&](int32_t b) { return evictable_block(b); });
    if (victim != lru_.end()) {
      evict_block(*victim);
      continue;
    }
    if (!image_lru_.empty()) {
      evict_image(image_lru_.front());
      continue;
    }
    return false;
  }
}

grow_result block_accounting::grow(const block_grow& g) {
  grow_result r;
  r.request_id = g.request_id;
  auto it = tables_.find(g.request_id);
  bool is_new = it == tables_.end();
  std::vector<int32_t> table = is_new ? std::vector<int32_t>{} : it->second;
  size_t held_before = table.size();
  if (is_new) {
    int32_t limit = std::min<int32_t>({g.max_hit_blocks, static_cast<int32_t>(g.hashes.size()), g.total_blocks});
    int32_t kv_hit = 0;
    while (kv_hit < limit && index_.count(g.hashes[kv_hit]))
      ++kv_hit;
    r.kv_hit_blocks = kv_hit;
    int32_t hit = kv_hit;
    if (g.needs_state) {
      // SPEC B5: the largest boundary with both the KV before it and a READY image at it.
      while (hit > 0 && !image_ready(g.hashes[hit - 1]))
        --hit;
      if (hit > 0) {
        r.restore_hash = g.hashes[hit - 1];
        auto& img = images_.at(r.restore_hash);
        if (img.on_lru) {
          image_lru_.erase(img.lru_pos);
          img.on_lru = false;
        }
        ++img.pins[g.request_id];
        r.restore_units = img.units;
      }
    }
    for (int32_t i = 0; i < hit; ++i) {
      int32_t b = index_.at(g.hashes[i]);
      hold(b);
      table.push_back(b);
    }
    r.num_hit_blocks = hit;
  }
  auto need_blocks = static_cast<int32_t>(std::max<int64_t>(0, int64_t(g.total_blocks) - int64_t(table.size())));
  std::vector<const checkpoint_position*> new_images;
  for (const auto& cp : g.checkpoints)
    if (cp.position > r.num_hit_blocks * block_size_ && !images_.count(cp.hash))
      new_images.push_back(&cp);
  int32_t need = need_blocks + g.units_per_image * static_cast<int32_t>(new_images.size());
  const bool private_load =
      g.needs_state && g.load_image_position > r.num_hit_blocks * block_size_ && is_new &&
      std::none_of(new_images.begin(), new_images.end(),
                   [&](const checkpoint_position* cp) { return cp->position == g.load_image_position; });
  if (private_load)
    need += g.units_per_image;
  if (need > available()) {
    for (size_t i = held_before; i < table.size(); ++i)
      unhold(table[i]); // all or nothing: give back this grow's hits and pin
    if (r.restore_hash)
      unpin(g.request_id, r.restore_hash);
    grow_result refused;
    refused.request_id = g.request_id;
    refused.block_table = is_new ? std::vector<int32_t>{} : it->second;
    return refused;
  }
  for (int32_t i = 0; i < need_blocks; ++i) {
    int32_t b = -1;
    take_fresh(b);
    table.push_back(b);
  }
  for (const auto* cp : new_images) {
    image_state img;
    img.owner = g.request_id;
    for (int32_t i = 0; i < g.units_per_image; ++i) {
      int32_t u = -1;
      take_fresh(u);
      blocks_[u].unit = true;
      img.units.push_back(u);
    }
    r.reserved.push_back({cp->position, cp->hash, img.units});
    images_.emplace(cp->hash, std::move(img));
  }
  if (private_load) {
    auto& units = load_units_[g.request_id];
    for (int32_t i = 0; i < g.units_per_image; ++i) {
      int32_t u = -1;
      take_fresh(u);
      blocks_[u].unit = true;
      units.push_back(u);
    }
    r.load_units = units;
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
  for (const auto& [hash, img] : images_)
    for (auto u : img.units) {
      if (!blocks_[u].unit)
        return "unit " + std::to_string(u) + " of an image is not marked as a unit";
      ++refs[u];
    }
  for (const auto& [id, units] : load_units_)
    for (auto u : units) {
      if (!blocks_[u].unit)
        return "private load unit " + std::to_string(u) + " is not marked as a unit";
      ++refs[u];
    }
  for (size_t b = 0; b < blocks_.size(); ++b)
    if (refs[b] != blocks_[b].refs)
      return "block " + std::to_string(b) + " refcount " + std::to_string(blocks_[b].refs) + " but held " +
             std::to_string(refs[b]) + " times";
  std::vector<int> on_list(blocks_.size(), 0);
  for (auto b : free_) {
    if (blocks_[b].refs || blocks_[b].indexed || blocks_[b].unit)
      return "free block " + std::to_string(b) + " is held, indexed or a unit";
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
  size_t idle = 0;
  for (const auto& [hash, img] : images_) {
    bool should = img.ready && img.pins.empty();
    if (should != img.on_lru)
      return "image " + std::to_string(hash) + " is " + (img.on_lru ? "" : "not ") + "on the image LRU";
    idle += should;
    if (!img.ready && img.owner == 0)
      return "COPYING image " + std::to_string(hash) + " has no owner";
  }
  if (idle != image_lru_.size())
    return "image LRU holds " + std::to_string(image_lru_.size()) + " entries for " + std::to_string(idle) +
           " idle images";
  return {};
}

} // namespace ordo
