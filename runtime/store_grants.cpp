#include "runtime/store_grants.hpp"

namespace ordo {

void store_grant_ledger::granted(uint64_t gen, const object_key& key, uint64_t bytes, bool reservation,
                                 std::optional<uint64_t> staged) {
  held_key& h = held_[key];
  h.gen = gen;
  h.bytes = bytes;
  ++(reservation ? h.reservations : h.pins);
  if (staged) {
    if (reservation)
      h.staged_reservation = staged;
    else
      h.staged_pins.push_back(*staged);
  }
  ++outstanding_[gen];
}

store_grant_ledger::finished store_grant_ledger::finish(const object_key& key, bool reservation) {
  finished out;
  auto it = held_.find(key);
  if (it == held_.end())
    return out; // never granted by a session (a store that was unreachable refused it)
  held_key& h = it->second;
  int32_t& n = reservation ? h.reservations : h.pins;
  if (n <= 0)
    return out;
  --n;
  out.bytes = h.bytes;
  if (reservation) {
    out.staged = h.staged_reservation;
    h.staged_reservation.reset();
  } else if (!h.staged_pins.empty()) {
    out.staged = h.staged_pins.back();
    h.staged_pins.pop_back();
  }
  out.gen = h.gen;
  if (h.pins == 0 && h.reservations == 0)
    held_.erase(it);
  auto o = outstanding_.find(*out.gen);
  if (o != outstanding_.end() && --o->second <= 0)
    outstanding_.erase(o);
  return out;
}

finished_routes store_grant_ledger::finish_step(const store_step& step, std::optional<uint64_t> live) {
  finished_routes out;
  auto routed = [&](const finished& f) {
    if (!f.gen)
      return false;
    if (live && *f.gen == *live)
      return true;
    out.ended_sessions.push_back(*f.gen);
    return false;
  };
  // A commit's staging range is free only after its bytes reached the store.
  for (size_t i = 0; i < step.commits.size(); ++i) {
    const auto& k = step.commits[i];
    const finished f = finish(k, true);
    const bool forward = routed(f);
    if (f.staged) {
      out.give_back_after.push_back(*f.staged);
      if (forward)
        out.writes.push_back({k, *f.staged, f.bytes});
    }
    if (forward) {
      out.forward.commits.push_back(k);
      if (i < step.commit_checksums.size()) // the gather's checksum travels with its commit
        out.forward.commit_checksums.push_back(step.commit_checksums[i]);
    }
  }
  for (const auto* keys : {&step.aborts, &step.unpins, &step.unpins_corrupt})
    for (const auto& k : *keys) {
      const finished f = finish(k, keys == &step.aborts);
      if (f.staged)
        out.give_back_now.push_back(*f.staged);
      if (routed(f))
        (keys == &step.aborts ? out.forward.aborts
                              : keys == &step.unpins ? out.forward.unpins : out.forward.unpins_corrupt)
            .push_back(k);
    }
  return out;
}

bool store_grant_ledger::held_elsewhere(const object_key& key, uint64_t gen) const {
  auto it = held_.find(key);
  return it != held_.end() && it->second.gen != gen;
}

int64_t store_grant_ledger::outstanding(uint64_t gen) const {
  auto it = outstanding_.find(gen);
  return it == outstanding_.end() ? 0 : it->second;
}

void store_grant_ledger::defer_release(uint64_t gen, const object_key& key, bool reservation) {
  if (deferred_gen_ != gen)
    deferred_ = {};
  deferred_gen_ = gen;
  (reservation ? deferred_.aborts : deferred_.unpins).push_back(key);
}

store_step store_grant_ledger::take_deferred(uint64_t gen) {
  store_step out;
  if (deferred_gen_ == gen)
    out = std::move(deferred_);
  deferred_ = {};
  return out;
}

} // namespace ordo
