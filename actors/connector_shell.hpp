// What the connector actors share (actors/connector.cpp: connector and pd_connector,
// actors/multi_connector.cpp): the order check of connector steps and a bounded memory of the
// requests they have seen a lookup of.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>

#include <caf/error.hpp>
#include <spdlog/spdlog.h>

#include "messages/connector.hpp"

namespace ordo {

// A connector step out of (epoch, seq) order is refused and changes nothing. `Self`'s state has
// `steps` (a sequence_check) and `io` (its door).
template <class Self>
std::optional<caf::error> out_of_order(Self* self, const connector_step& step) {
  auto& st = self->state;
  auto why = st.steps.accept(step.header.epoch, step.header.seq);
  if (why.empty())
    return std::nullopt;
  spdlog::critical("connector: {}", why);
  return st.io.refuse(self, "connector_step_done", why);
}

// What a connector keeps per request from its lookup for the request's later steps. The oldest
// entries are forgotten beyond 65536 requests: a request's loads and unpins come long before that
// many newer lookups.
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
