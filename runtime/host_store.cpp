#include "runtime/host_store.hpp"

#include "runtime/checksum.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <xxhash.h>

namespace ordo {

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The header takes a whole number of alignment units, so the data that follows stays aligned.
constexpr size_t header_span = (sizeof(object_header) + object_alignment - 1) / object_alignment * object_alignment;


std::string key_text(const object_key& k) {
  return "(" + std::to_string(k.namespace_id) + ", " + std::to_string(k.hash) + ", " + std::to_string(k.kind) + ")";
}

// The largest free run if every range in `extra` were also free (ranges never overlap).
size_t largest_run(const std::map<size_t, size_t>& free, const std::vector<std::pair<size_t, size_t>>& extra) {
  std::vector<std::pair<size_t, size_t>> ranges(free.begin(), free.end());
  ranges.insert(ranges.end(), extra.begin(), extra.end());
  std::sort(ranges.begin(), ranges.end());
  size_t best = 0, run_start = 0, run_end = 0;
  bool open = false;
  for (const auto& [offset, length] : ranges) {
    if (open && offset == run_end) {
      run_end += length;
    } else {
      run_start = offset, run_end = offset + length, open = true;
    }
    best = std::max(best, run_end - run_start);
  }
  return best;
}

} // namespace

const char* to_string(reserve_status s) {
  switch (s) {
  case reserve_status::ok: return "ok";
  case reserve_status::exists: return "exists";
  case reserve_status::too_large: return "too_large";
  case reserve_status::no_space: return "no_space";
  }
  return "unknown";
}

const char* to_string(pin_status s) {
  switch (s) {
  case pin_status::ok: return "ok";
  case pin_status::missing: return "missing";
  case pin_status::bad_checksum: return "bad_checksum";
  case pin_status::bad_header: return "bad_header";
  }
  return "unknown";
}

size_t host_store::object_span(size_t data_bytes) { return round_up(header_span + data_bytes, object_alignment); }

host_store::host_store(uint8_t* arena, size_t capacity_bytes) : arena_(arena), capacity_(capacity_bytes) {
  if (capacity_ > 0)
    free_.emplace(0, capacity_);
  stats_.bytes_capacity = static_cast<int64_t>(capacity_);
}

reserve_status host_store::reserve(const object_key& key, const object_header& header, size_t data_bytes,
                                   size_t& data_offset) {
  if (objects_.count(key))
    return reserve_status::exists;
  // The first test keeps object_span from overflowing on absurd sizes.
  if (data_bytes > capacity_ || object_span(data_bytes) > capacity_) {
    ++stats_.rejected_total;
    return reserve_status::too_large;
  }
  const size_t span = object_span(data_bytes);
  size_t offset = 0;
  if (!allocate(span, offset)) {
    // Evict only when evicting every evictable object would make room: a reserve that cannot
    // succeed leaves the store as it was.
    std::vector<std::pair<size_t, size_t>> evictable;
    for (const auto& k : lru_) {
      const object& o = objects_.at(k);
      evictable.emplace_back(o.offset, o.span);
    }
    if (largest_run(free_, evictable) < span) {
      ++stats_.rejected_total;
      return reserve_status::no_space;
    }
    // LRU order, one victim at a time, until a run fits (guaranteed before the LRU empties).
    while (!allocate(span, offset)) {
      object_key victim = lru_.front();
      drop(victim);
      ++stats_.evictions_total;
    }
  }
  object o;
  o.offset = offset;
  o.span = span;
  o.data_offset = offset + header_span;
  o.header = header;
  o.header.magic = 0;
  o.header.checksum = 0;
  o.header.kind = key.kind;
  o.header.data_bytes = data_bytes;
  objects_.emplace(key, o);
  stats_.bytes_used += static_cast<int64_t>(span);
  ++stats_.reserves_total;
  data_offset = o.data_offset;
  return reserve_status::ok;
}

bool host_store::commit(const object_key& key, std::optional<uint64_t> summed) {
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.committed)
    return false;
  object& o = it->second;
  o.header.magic = object_magic;
  o.header.checksum = summed ? *summed : object_checksum(arena_ + o.data_offset, o.header.data_bytes);
  std::memcpy(arena_ + o.offset, &o.header, sizeof(object_header));
  o.committed = true;
  o.on_lru = true;
  o.lru_pos = lru_.insert(lru_.end(), key);
  ++stats_.num_objects;
  ++stats_.commits_total;
  return true;
}

bool host_store::set_committer(const object_key& key, std::string committer) {
  auto it = objects_.find(key);
  if (it == objects_.end() || !it->second.committed)
    return false;
  it->second.committer = std::move(committer);
  return true;
}

const std::string* host_store::committer_of(const object_key& key) const {
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : &it->second.committer;
}

bool host_store::abort(const object_key& key) {
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.committed)
    return false;
  drop(key);
  ++stats_.aborts_total;
  return true;
}

bool host_store::contains(const object_key& key) const {
  auto it = objects_.find(key);
  return it != objects_.end() && it->second.committed;
}

pin_status host_store::pin(const object_key& key, uint64_t expected_fingerprint, uint64_t expected_boundary,
                           object_header& header, size_t& data_offset, bool hash_data) {
  auto it = objects_.find(key);
  if (it == objects_.end() || !it->second.committed) {
    ++stats_.misses_total;
    return pin_status::missing;
  }
  object& o = it->second;
  if (o.corrupt) // a reader found it wrong; it goes when its last reader does
    return pin_status::bad_checksum;
  // Read back from the arena, not from the copy: the bytes a reader would load are what is checked.
  object_header stored;
  std::memcpy(&stored, arena_ + o.offset, sizeof(object_header));
  const object_header& kept = o.header;
  const bool header_ok = stored.magic == object_magic && stored.kind == key.kind &&
                         stored.layout_fingerprint == expected_fingerprint &&
                         stored.boundary_hash == expected_boundary && stored.first_token == kept.first_token &&
                         stored.tokens == kept.tokens && stored.num_blocks == kept.num_blocks &&
                         stored.data_bytes == kept.data_bytes && stored.checksum == kept.checksum;
  if (!header_ok) {
    ++stats_.header_failures_total;
    // NOTE(pinned-stay): an object with readers is never dropped under them; only this pin fails.
    if (o.pins == 0) {
      drop(key);
      ++num_dropped_;
    }
    return pin_status::bad_header;
  }
  // A pinned object is never evicted or rewritten, so one hash serves every hashing pin of a
  // pinned period; a summing reader's pin (hash_data false) leaves the data to its own check.
  if (hash_data && !o.hashed) {
    if (object_checksum(arena_ + o.data_offset, kept.data_bytes) != kept.checksum) {
      ++stats_.checksum_failures_total;
      if (o.pins == 0 && o.holds == 0) {
        drop(key);
        ++num_dropped_;
      } else {
        o.corrupt = true; // its other readers' own checks fail too; it goes when they are done
      }
      return pin_status::bad_checksum;
    }
    o.hashed = true;
  }
  if (o.on_lru) {
    lru_.erase(o.lru_pos);
    o.on_lru = false;
  }
  ++o.pins;
  ++stats_.pins_total;
  header = stored;
  data_offset = o.data_offset;
  return pin_status::ok;
}

int32_t host_store::evict_all(std::optional<uint64_t> only_namespace) {
  std::vector<object_key> victims;
  for (const auto& key : lru_)
    if (!only_namespace || key.namespace_id == *only_namespace)
      victims.push_back(key);
  for (const auto& key : victims) {
    drop(key);
    ++stats_.evictions_total;
  }
  return static_cast<int32_t>(victims.size());
}

bool host_store::unpin(const object_key& key) {
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.pins == 0)
    return false;
  if (--it->second.pins == 0)
    it->second.hashed = false; // the next hashing pin hashes again, held or not
  to_lru_if_idle(key, it->second);
  return true;
}

bool host_store::unpin_corrupt(const object_key& key) {
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.pins == 0)
    return false;
  if (!it->second.corrupt)
    ++stats_.checksum_failures_total;
  it->second.corrupt = true;
  if (--it->second.pins == 0)
    it->second.hashed = false;
  to_lru_if_idle(key, it->second);
  return true;
}

bool host_store::hold(const object_key& key) {
  auto it = objects_.find(key);
  if (it == objects_.end() || !it->second.committed)
    return false;
  object& o = it->second;
  if (o.on_lru) {
    lru_.erase(o.lru_pos);
    o.on_lru = false;
  }
  ++o.holds;
  return true;
}

bool host_store::release_hold(const object_key& key) {
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.holds == 0)
    return false;
  --it->second.holds;
  to_lru_if_idle(key, it->second);
  return true;
}

// An object nobody pins or holds goes back on the LRU, as the most recently used; a corrupt one
// is dropped instead.
void host_store::to_lru_if_idle(const object_key& key, object& o) {
  if (o.pins != 0 || o.holds != 0 || o.on_lru)
    return;
  if (o.corrupt) {
    drop(key);
    ++num_dropped_;
    return;
  }
  o.on_lru = true;
  o.lru_pos = lru_.insert(lru_.end(), key);
}

bool host_store::test_corrupt(const object_key& key, size_t data_byte) {
  auto it = objects_.find(key);
  if (it == objects_.end() || !it->second.committed || it->second.header.data_bytes == 0)
    return false;
  const object& o = it->second;
  arena_[o.data_offset + data_byte % o.header.data_bytes] ^= 0xff;
  return true;
}

bool host_store::allocate(size_t span, size_t& offset) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < span)
      continue;
    offset = it->first;
    const size_t rest = it->second - span;
    free_.erase(it);
    if (rest > 0)
      free_.emplace(offset + span, rest);
    return true;
  }
  return false;
}

void host_store::release_range(size_t offset, size_t span) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + span) {
    span += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += span;
      return;
    }
  }
  free_.emplace_hint(next, offset, span);
}

void host_store::drop(const object_key& key) {
  auto it = objects_.find(key);
  object& o = it->second;
  if (o.on_lru)
    lru_.erase(o.lru_pos);
  if (o.committed)
    --stats_.num_objects;
  stats_.bytes_used -= static_cast<int64_t>(o.span);
  release_range(o.offset, o.span);
  objects_.erase(it);
}

std::string host_store::check_invariants() const {
  // Free ranges and object spans tile [0, capacity) exactly.
  std::vector<std::pair<size_t, size_t>> ranges; // offset, span
  size_t prev_free_end = 0;
  bool first_free = true;
  for (const auto& [offset, length] : free_) {
    if (length == 0)
      return "empty free range at " + std::to_string(offset);
    if (offset % object_alignment != 0)
      return "free range at " + std::to_string(offset) + " is not aligned";
    if (!first_free && offset <= prev_free_end)
      return "free range at " + std::to_string(offset) + " touches or overlaps the previous one (not coalesced)";
    first_free = false;
    prev_free_end = offset + length;
    ranges.emplace_back(offset, length);
  }
  int64_t committed = 0, writing = 0, idle = 0, used = 0;
  for (const auto& [key, o] : objects_) {
    const std::string name = "object " + key_text(key);
    if (o.offset % object_alignment != 0 || o.span != object_span(o.header.data_bytes) ||
        o.data_offset != o.offset + header_span)
      return name + " has a bad offset or span";
    if (o.header.kind != key.kind)
      return name + " has header kind " + std::to_string(o.header.kind);
    if (o.committed != (o.header.magic == object_magic))
      return name + " is " + (o.committed ? "" : "not ") + "committed but its magic says otherwise";
    if (!o.committed && (o.pins != 0 || o.holds != 0 || o.on_lru))
      return name + " is being written but pinned, held or on the LRU";
    if (o.pins < 0 || o.holds < 0)
      return name + " has a negative pin or hold count";
    const bool should_be_on_lru = o.committed && o.pins == 0 && o.holds == 0;
    if (o.on_lru != should_be_on_lru)
      return name + " is " + (o.on_lru ? "" : "not ") + "on the LRU";
    if (o.on_lru && !(*o.lru_pos == key))
      return name + " has an LRU position that names another key";
    committed += o.committed;
    writing += !o.committed;
    idle += should_be_on_lru;
    used += static_cast<int64_t>(o.span);
    ranges.emplace_back(o.offset, o.span);
  }
  std::sort(ranges.begin(), ranges.end());
  size_t end = 0;
  for (const auto& [offset, span] : ranges) {
    if (offset != end)
      return "arena " + std::string(offset < end ? "overlap" : "gap") + " at " + std::to_string(std::min(offset, end));
    end = offset + span;
  }
  if (end != capacity_)
    return "arena tiles up to " + std::to_string(end) + " of " + std::to_string(capacity_);
  if (static_cast<int64_t>(lru_.size()) != idle)
    return "LRU holds " + std::to_string(lru_.size()) + " keys, " + std::to_string(idle) + " committed unpinned objects";
  for (const auto& k : lru_) {
    auto it = objects_.find(k);
    if (it == objects_.end() || !it->second.on_lru)
      return "LRU names " + key_text(k) + " which is not an idle committed object";
  }
  if (stats_.num_objects != committed)
    return "num_objects " + std::to_string(stats_.num_objects) + " but " + std::to_string(committed) + " committed";
  if (stats_.bytes_used != used)
    return "bytes_used " + std::to_string(stats_.bytes_used) + " but spans sum to " + std::to_string(used);
  if (stats_.bytes_capacity != static_cast<int64_t>(capacity_))
    return "bytes_capacity does not match the arena";
  if (stats_.reserves_total != stats_.commits_total + stats_.aborts_total + writing)
    return "reserves_total does not equal commits + aborts + reservations being written";
  if (stats_.commits_total != stats_.num_objects + stats_.evictions_total + num_dropped_)
    return "commits_total does not equal objects + evictions + dropped on a failed pin";
  return "";
}

store_contains_done apply(const host_store* store, const store_contains& query) {
  store_contains_done out;
  out.present.reserve(query.keys.size());
  bool leading = true;
  for (const auto& k : query.keys) {
    const bool here = store && store->contains(k);
    out.present.push_back(here ? 1 : 0);
    leading = leading && here;
    out.num_leading_committed += leading ? 1 : 0;
  }
  return out;
}

namespace {

store_grant pin_one(host_store* store, const object_ref& o, bool hash_data) {
  store_grant g;
  g.key = o.key;
  if (!store) {
    g.status = to_string(pin_status::missing);
    return g;
  }
  object_header h;
  size_t offset = 0;
  // NOTE(verify): the layout fingerprint is the namespace (it covers page and state layouts);
  // the boundary is the hash the object is filed under.
  const auto status = store->pin(o.key, o.key.namespace_id, o.key.hash, h, offset, hash_data);
  g.status = to_string(status);
  if (status != pin_status::ok)
    return g;
  // Same key, other tokens: loading it would put the wrong KV at the order's positions.
  if (h.data_bytes != o.data_bytes || h.first_token != o.first_token || h.tokens != o.tokens ||
      h.num_blocks != o.num_blocks) {
    store->unpin(o.key);
    g.status = "object describes other tokens";
    return g;
  }
  g.ok = true;
  g.checksum = h.checksum;
  g.data_offset = offset;
  g.data_bytes = h.data_bytes;
  return g;
}

store_grant reserve_one(host_store* store, const object_ref& o) {
  store_grant g;
  g.key = o.key;
  if (!store) {
    g.status = to_string(reserve_status::no_space);
    return g;
  }
  object_header h;
  h.kind = o.key.kind;
  h.layout_fingerprint = o.key.namespace_id;
  h.boundary_hash = o.key.hash;
  h.first_token = o.first_token;
  h.tokens = o.tokens;
  h.num_blocks = o.num_blocks;
  h.data_bytes = o.data_bytes;
  size_t offset = 0;
  const auto status = store->reserve(o.key, h, o.data_bytes, offset);
  g.status = to_string(status);
  g.ok = status == reserve_status::ok;
  if (g.ok) {
    g.data_offset = offset;
    g.data_bytes = o.data_bytes;
  }
  return g;
}

} // namespace

std::string store_step_problem(const store_step& step) {
  if (step.commit_checksums.empty() || step.commit_checksums.size() == step.commits.size())
    return {};
  return "store_step has " + std::to_string(step.commit_checksums.size()) + " commit checksums for " +
         std::to_string(step.commits.size()) + " commits: send one per commit, or none";
}

store_step_applied apply(host_store* store, const store_step& step, std::optional<uint64_t> evict_namespace) {
  store_step_applied out;
  out.done.header = step.header;
  if (store) {
    if (const std::string why = store_step_problem(step); !why.empty())
      throw std::invalid_argument(why);
    for (size_t i = 0; i < step.commits.size(); ++i) {
      const std::optional<uint64_t> summed =
          step.commit_checksums.empty() ? std::nullopt : std::optional<uint64_t>(step.commit_checksums[i]);
      if (!store->commit(step.commits[i], summed))
        out.commits_unreserved.push_back(step.commits[i]);
    }
    for (const auto& k : step.aborts)
      store->abort(k);
    for (const auto& k : step.unpins)
      if (!store->unpin(k))
        out.unpins_unpinned.push_back(k);
    for (const auto& k : step.unpins_corrupt)
      if (!store->unpin_corrupt(k))
        out.unpins_unpinned.push_back(k);
    if (step.evict_all)
      out.done.num_evicted = store->evict_all(evict_namespace);
  }
  for (const auto& o : step.pins)
    out.done.pins.push_back(pin_one(store, o, !step.pins_summed));
  for (const auto& o : step.reserves)
    out.done.reserves.push_back(reserve_one(store, o));
  out.done.leased.assign(step.leases.size(), 0); // leases are a store server's (it fills these)
  out.done.stats = store ? store->stats() : store_stats{};
  return out;
}

} // namespace ordo
