// What a connector keeps per request from its lookup for the request's later steps (which store
// its loads and unpins go to), bounded: the oldest entries are forgotten beyond 65536 requests,
// since a request's loads and unpins come long before that many newer lookups. Pure: no CAF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

namespace ordo {

template <class V>
class recent_requests {
public:
  // Sets the entry of `request_id` (a new request becomes the newest).
  void put(uint64_t request_id, V value) {
    if (!map_.insert_or_assign(request_id, std::move(value)).second)
      return;
    order_.push_back(request_id);
    while (order_.size() > limit) {
      map_.erase(order_.front());
      order_.pop_front();
    }
  }
  V* find(uint64_t request_id) {
    auto it = map_.find(request_id);
    return it == map_.end() ? nullptr : &it->second;
  }
  const V* find(uint64_t request_id) const {
    auto it = map_.find(request_id);
    return it == map_.end() ? nullptr : &it->second;
  }

private:
  static constexpr size_t limit = 65536;
  std::unordered_map<uint64_t, V> map_;
  std::deque<uint64_t> order_; // oldest first
};

} // namespace ordo
