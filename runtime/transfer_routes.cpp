#include "runtime/transfer_routes.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace ordo {

namespace {

connector_lookup_done none_lookup(const connector_lookup& lookup, const std::string& name) {
  return connector_lookup_done{lookup.request_id, 0, 0, name, {}, {}, {}, false};
}

connector_step_done none_step(const connector_step& step) {
  connector_step_done done; // an eviction finds nothing to drop
  done.header = step.header;
  for (const auto& l : step.loads)
    done.loads.push_back({l.request_id, l.object.key, false, "connector none holds nothing", 0, 0, {}});
  for (const auto& s : step.saves)
    done.saves.push_back({s.request_id, s.object.key, false, "connector none stores nothing", 0, 0, {}});
  for (const auto& l : step.leases)
    done.leases.push_back({l.request_id, 0, 0});
  return done;
}

std::vector<size_t> positions(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

} // namespace

transfer_routes::transfer_routes(route_table table) : table_(std::move(table)) {
  if (table_.leaves.empty())
    throw std::invalid_argument("connector " + table_.name + ": a route table needs a leaf");
  for (const auto& route : table_.leaves) {
    leaf_state leaf;
    leaf.route = route;
    if (route.kind != route_kind::none)
      leaf.policy.emplace(route.policy);
    leaves_.push_back(std::move(leaf));
    own_stamps_.emplace_back(1);
  }
}

size_t transfer_routes::num_peers() const {
  size_t n = 0;
  for (const auto& leaf : leaves_)
    n += leaf.peers.size();
  return n;
}

void transfer_routes::forget_peer(const store_ref& store) {
  if (store.leaf < leaves_.size() && !store.peer.empty())
    leaves_[store.leaf].peers.erase(store.peer);
}

// Past max_peer_clients a new peer gets no store unless `always` (the loads of a request whose
// lookup found a client that has since ended: they must go somewhere to be refused).
bool transfer_routes::admit_peer(leaf_state& leaf, const std::string& peer, bool always) {
  if (leaf.peers.count(peer))
    return true;
  if (num_peers() >= max_peer_clients && !always)
    return false;
  leaf.peers.emplace(peer, sequence_stamp(1));
  return true;
}

// --- lookups ------------------------------------------------------------------------------------

lookup_next transfer_routes::start_lookup(const connector_lookup& lookup) { return from_leaf(lookup, 0); }

// Asks leaf `i`'s store and, while nothing is found, the leaves after it; a leaf with nothing to ask
// answers at once.
lookup_next transfer_routes::from_leaf(const connector_lookup& lookup, size_t i) {
  std::vector<std::string> notes;
  std::vector<store_ref> opened;
  auto with_log = [&](lookup_next next) {
    next.notes = std::move(notes);
    next.opened = std::move(opened);
    return next;
  };
  for (;; ++i) {
    auto& leaf = leaves_[i];
    connector_lookup_done done;
    if (!leaf.policy) {
      done = none_lookup(lookup, leaf.route.name);
    } else {
      store_ref at{i, {}};
      const bool remote = leaf.route.kind == route_kind::pd && !lookup.peer.empty();
      bool asks = true;
      const bool known = remote && leaf.peers.count(lookup.peer);
      if (remote && !known && !admit_peer(leaf, lookup.peer, false)) {
        notes.push_back("connector: request " + std::to_string(lookup.request_id) + " names the prefill node " +
                        lookup.peer + ", but this node already keeps " + std::to_string(max_peer_clients) +
                        " peers' clients (the most it keeps); the request recomputes");
        asks = false;
      } else if (remote) {
        at.peer = lookup.peer;
        if (!known)
          opened.push_back(at);
        leaf.request_peer.put(lookup.request_id, {lookup.peer, lookup.transfer_id});
      }
      auto probe = leaf.policy->probe(lookup);
      if (asks && !probe.keys.empty()) {
        lookup_next next;
        next.ask = lookup_ask{std::move(at), std::move(probe), remote};
        return with_log(std::move(next));
      }
      done = leaf.policy->answer(lookup, {});
    }
    if (done.cpu_tokens > 0 || i + 1 == leaves_.size())
      return with_log(settle(lookup, i, std::move(done)));
  }
}

lookup_next transfer_routes::lookup_answered(const connector_lookup& lookup, const lookup_ask& asked,
                                             const store_contains_done& found) {
  const size_t i = asked.store.leaf;
  auto done = leaves_.at(i).policy->answer(lookup, found);
  done.from_peer = asked.from_peer;
  if (done.cpu_tokens == 0 && i + 1 < leaves_.size())
    return from_leaf(lookup, i + 1); // first hit wins
  return settle(lookup, i, std::move(done));
}

// Leaf `i` answers: a multi connector remembers it for the request's loads and unpins.
lookup_next transfer_routes::settle(const connector_lookup& lookup, size_t i, connector_lookup_done done) {
  lookup_next next;
  if (table_.multi()) {
    winner_.put(lookup.request_id, i);
    if (done.cpu_tokens > 0)
      next.hit_leaf = i;
    done.connector = "multi:" + leaves_[i].route.name;
  }
  next.done = std::move(done);
  return next;
}

// --- steps --------------------------------------------------------------------------------------

command_header transfer_routes::stamp(const store_ref& store, const command_header& step_header) {
  if (!table_.store_stamps)
    return step_header;
  auto& s = store.peer.empty() ? own_stamps_[store.leaf] : leaves_[store.leaf].peers.at(store.peer);
  return {s.epoch(), s.next()};
}

// The orders of `step` each leaf gets. One leaf gets the whole step; multi's: every save (they fan
// out), the eviction, the loads and unpins of the requests whose lookup it answered, the commits
// and aborts of the saves it granted (a save no leaf granted has none), and (P/D) the leases.
void transfer_routes::share(const connector_step& step, split_step& out) {
  const size_t n = leaves_.size();
  out.leaves.resize(n);
  if (!table_.multi()) {
    auto& s = out.leaves[0];
    s.sub = step;
    s.load_index = positions(step.loads.size());
    s.lease_index = positions(step.leases.size());
    return;
  }
  auto winner_of = [&](uint64_t request_id) {
    const size_t* leaf = winner_.find(request_id);
    return leaf ? *leaf : 0;
  };
  for (size_t i = 0; i < n; ++i) {
    auto& sub = out.leaves[i].sub;
    sub.header = step.header;
    sub.evict_all = step.evict_all;
    sub.saves = step.saves;
  }
  for (const auto& f : step.finished) {
    if (!f.is_save) {
      out.leaves[winner_of(f.request_id)].sub.finished.push_back(f);
      continue;
    }
    auto it = saving_.find(f.key);
    if (it == saving_.end())
      continue;
    for (size_t i : it->second)
      out.leaves[i].sub.finished.push_back(f);
    saving_.erase(it);
  }
  for (size_t k = 0; k < step.loads.size(); ++k) {
    auto& s = out.leaves[winner_of(step.loads[k].request_id)];
    s.sub.loads.push_back(step.loads[k]);
    s.load_index.push_back(k);
  }
  for (size_t k = 0; k < step.leases.size(); ++k)
    for (size_t i = 0; i < n; ++i)
      if (leaves_[i].route.takes_leases) {
        out.leaves[i].sub.leases.push_back(step.leases[k]);
        out.leaves[i].lease_index.push_back(k);
      }
}

split_step transfer_routes::split(const connector_step& step) {
  split_step out;
  out.step = step;
  share(step, out);
  for (size_t i = 0; i < leaves_.size(); ++i)
    split_leaf(i, out);
  return out;
}

// Leaf `i`'s share as store steps: one to its own store; a P/D leaf's also one to each peer that
// a load or an unpin of its share goes to.
void transfer_routes::split_leaf(size_t i, split_step& out) {
  auto& leaf = leaves_[i];
  if (!leaf.policy)
    return; // none: nothing reaches a store
  const connector_step& sub = out.leaves[i].sub;
  std::map<std::string, split_step::part_share> parts; // by peer, this node's store ("") first
  std::map<std::string, std::vector<std::string>> releases; // per peer: transfer ids
  auto part = [&](const std::string& peer) -> split_step::part_share& {
    auto it = parts.find(peer);
    if (it == parts.end()) {
      admit_peer(leaf, peer, true);
      it = parts.emplace(peer, split_step::part_share{}).first;
      it->second.sub.header = sub.header;
    }
    return it->second;
  };
  auto& own = parts.emplace("", split_step::part_share{}).first->second;
  own.sub.header = sub.header;
  own.sub.evict_all = sub.evict_all;
  own.sub.leases = sub.leases;
  const bool pd = leaf.route.kind == route_kind::pd;
  for (const auto& f : sub.finished) {
    auto* pr = pd && !f.is_save ? leaf.request_peer.find(f.request_id) : nullptr;
    part(pr ? pr->peer : std::string()).sub.finished.push_back(f);
    if (pr && !pr->transfer_id.empty()) {
      releases[pr->peer].push_back(std::move(pr->transfer_id));
      pr->transfer_id.clear(); // once per request
    }
  }
  for (size_t k = 0; k < sub.loads.size(); ++k) {
    const auto* pr = pd ? leaf.request_peer.find(sub.loads[k].request_id) : nullptr;
    auto& p = part(pr ? pr->peer : std::string());
    p.sub.loads.push_back(sub.loads[k]);
    p.load_index.push_back(k);
  }
  own.sub.saves = sub.saves;
  own.save_index = positions(sub.saves.size());
  for (auto& [peer, p] : parts) {
    store_part sp{store_ref{i, peer}, leaf.policy->to_store(p.sub)};
    if (auto r = releases.find(peer); r != releases.end())
      sp.step.releases = std::move(r->second);
    sp.step.header = stamp(sp.store, sub.header);
    out.parts.push_back(std::move(sp));
    out.shares.push_back(std::move(p));
  }
}

connector_step_done transfer_routes::merge(const split_step& split, const std::vector<store_step_done>& answers) {
  if (answers.size() != split.parts.size())
    throw std::logic_error("connector step: " + std::to_string(answers.size()) + " store answers for " +
                           std::to_string(split.parts.size()) + " store steps");
  std::vector<connector_step_done> leaves;
  for (size_t i = 0; i < leaves_.size(); ++i)
    leaves.push_back(merge_leaf(split, i, answers));
  if (!table_.multi())
    return std::move(leaves[0]);
  return merge_multi(split, std::move(leaves));
}

// Leaf `i`'s answer to its share: each store's grants back in the share's order; this node's store
// answers the stats, evictions, granularity and leases.
connector_step_done transfer_routes::merge_leaf(const split_step& split, size_t i,
                                                const std::vector<store_step_done>& answers) const {
  const connector_step& sub = split.leaves[i].sub;
  const auto& leaf = leaves_[i];
  if (!leaf.policy)
    return none_step(sub);
  connector_step_done done;
  done.header = sub.header;
  done.loads.resize(sub.loads.size());
  done.saves.resize(sub.saves.size());
  for (size_t k = 0; k < split.parts.size(); ++k) {
    if (split.parts[k].store.leaf != i)
      continue;
    const auto& share = split.shares[k];
    auto answered = leaf.policy->from_store(share.sub, answers[k]);
    for (size_t j = 0; j < share.load_index.size(); ++j)
      done.loads[share.load_index[j]] = std::move(answered.loads[j]);
    for (size_t j = 0; j < share.save_index.size(); ++j)
      done.saves[share.save_index[j]] = std::move(answered.saves[j]);
    if (split.parts[k].store.peer.empty()) {
      done.stats = answered.stats;
      done.num_evicted = answered.num_evicted;
      done.granularity = answered.granularity;
      done.leases = std::move(answered.leases);
    }
  }
  return done;
}

// multi: the leaves' answers as one. A load's grant is its leaf's, moved by the leaf's window
// offset; a lease holds what every P/D leaf holds; a save's grant is the first leaf's that granted
// it, with the others' offsets as its copies (and if none granted, "exists" wins, since the bytes
// are stored, else the first leaf's refusal); the stats are the first leaf's.
connector_step_done transfer_routes::merge_multi(const split_step& split, std::vector<connector_step_done> leaves) {
  const auto& step = split.step;
  connector_step_done done;
  done.header = step.header;
  done.loads.resize(step.loads.size());
  done.leases.resize(step.leases.size());
  for (size_t k = 0; k < step.leases.size(); ++k)
    done.leases[k].request_id = step.leases[k].request_id;
  for (size_t i = 0; i < leaves.size(); ++i) {
    auto& a = leaves[i];
    const auto& share = split.leaves[i];
    const uint64_t base = leaves_[i].route.window_offset;
    for (size_t k = 0; k < a.loads.size(); ++k) {
      auto g = std::move(a.loads[k]);
      if (g.ok)
        g.data_offset += base;
      done.loads[share.load_index[k]] = std::move(g);
    }
    for (size_t k = 0; k < a.leases.size(); ++k) {
      auto& into = done.leases[share.lease_index[k]];
      into.num_objects += a.leases[k].num_objects;
      into.lease_ms = std::max(into.lease_ms, a.leases[k].lease_ms);
    }
    done.num_evicted += a.num_evicted;
  }
  done.stats = leaves[0].stats;
  done.granularity = leaves[0].granularity;
  for (size_t k = 0; k < step.saves.size(); ++k) {
    transfer_grant g;
    std::vector<size_t> granted;
    for (size_t i = 0; i < leaves.size(); ++i) {
      const auto& a = leaves[i].saves[k];
      if (!a.ok)
        continue;
      const uint64_t at = a.data_offset + leaves_[i].route.window_offset;
      if (granted.empty()) {
        g = a;
        g.data_offset = at;
      } else {
        g.copies.push_back(at);
      }
      granted.push_back(i);
    }
    if (granted.empty()) {
      g = leaves[0].saves[k];
      for (const auto& a : leaves)
        if (a.saves[k].status == "exists")
          g = a.saves[k];
    } else {
      saving_[step.saves[k].object.key] = std::move(granted);
    }
    done.saves.push_back(std::move(g));
  }
  return done;
}

} // namespace ordo
