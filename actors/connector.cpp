#include "actors/connector.hpp"

#include <map>
#include <memory>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/connector_shell.hpp"
#include "runtime/connector_policy.hpp"
#include "runtime/sequence_check.hpp"

namespace ordo {

namespace {

struct connector_state {
  std::shared_ptr<const connector_policy> policy;
  store_actor store;
  sequence_check steps;
  door io;
  static inline const char* name = "connector";
};

using self_ptr = connector_actor::stateful_pointer<connector_state>;

// A lookup: the store query the policy needs, sent to `store`, and the answer built from its
// reply (from_peer: the coverage lies in a P/D peer's host tier).
template <class Self>
caf::result<connector_lookup_done> lookup_through(Self* self, const store_actor& store, const connector_lookup& lookup,
                                                  bool from_peer) {
  auto& st = self->state;
  auto probe = st.policy->lookup(lookup);
  if (!probe)
    return st.io.reply(self, st.policy->lookup_answered(lookup, {}));
  auto requester = self->current_sender(); // before the promise takes the request over
  auto rp = self->template make_response_promise<connector_lookup_done>();
  st.io.request(
      self, store, std::move(*probe),
      [=](store_contains_done& found, uint64_t) mutable {
        auto done = self->state.policy->lookup_answered(lookup, found);
        done.from_peer = from_peer;
        self->state.io.deliver(rp, requester, std::move(done));
      },
      [=](caf::error& err) mutable { self->state.io.fail(rp, requester, "connector_lookup_done", err); });
  return rp;
}

connector_actor::behavior_type connector(self_ptr self, std::string kind, std::optional<offload_options> options,
                                         store_actor store, uint64_t epoch, trace_tap tap) {
  auto& st = self->state;
  st.policy = make_connector_policy(kind, options);
  st.store = std::move(store);
  st.io = door("connector", std::move(tap));
  (void)epoch; // the first step of any epoch is accepted (sequence_check)
  return {
    [=](const connector_lookup& lookup) -> caf::result<connector_lookup_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), lookup);
      return lookup_through(self, st.store, lookup, false);
    },
    [=](const connector_step& step) -> caf::result<connector_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      if (auto refused = out_of_order(self, step))
        return *refused;
      auto to_store = st.policy->step(step);
      if (!to_store)
        return st.io.reply(self, st.policy->step_answered(step, {}));
      auto requester = self->current_sender(); // before the promise takes the request over
      auto rp = self->make_response_promise<connector_step_done>();
      st.io.request(
          self, st.store, std::move(*to_store),
          [=](store_step_done& answer, uint64_t) mutable {
            try {
              self->state.io.deliver(rp, requester, self->state.policy->step_answered(step, answer));
            } catch (const std::exception& e) {
              self->state.io.fail(rp, requester, "connector_step_done",
                                  caf::make_error(caf::sec::invalid_argument, e.what()));
            }
          },
          [=](caf::error& err) mutable { self->state.io.fail(rp, requester, "connector_step_done", err); });
      return rp;
    },
  };
}

} // namespace

connector_actor spawn_connector(caf::actor_system& sys, const std::string& kind,
                                std::optional<offload_options> policy, store_actor store, uint64_t epoch,
                                trace_tap tap) {
  return sys.spawn(connector, kind, std::move(policy), std::move(store), epoch, std::move(tap));
}

// --- P/D ----------------------------------------------------------------------------------------

namespace {

// NOTE(peer-clients): a decode node keeps at most this many peers' store clients; each ends
// itself after a minute unused, and the connector forgets it then.
constexpr size_t max_peer_clients = 64;

struct pd_state;
using pd_ptr = connector_actor::stateful_pointer<pd_state>;

struct pd_state {
  std::shared_ptr<const connector_policy> policy;
  store_actor local;
  std::function<store_actor(const std::string&)> peer_store;
  std::map<std::string, store_actor> peers;
  // Requests whose loads go to a peer: the peer and the transfer id whose lease the loads' unpins
  // release there.
  struct peer_request {
    std::string peer;
    std::string transfer_id;
  };
  recent_requests<peer_request> request_peer;
  std::map<caf::actor_id, sequence_stamp> stamps; // per store: its steps' (epoch, seq)
  sequence_check steps;
  door io;
  static inline const char* name = "connector";

  // The peers' store clients end with the connector (the actor system waits for every actor).
  ~pd_state() {
    for (auto& [endpoint, client] : peers)
      caf::anon_send_exit(client, caf::exit_reason::user_shutdown);
  }

  // The store of `peer` ("" = this node's), its client spawned on first use. Past
  // max_peer_clients a new peer gets none (nullopt) unless `always` (loads of a request whose
  // lookup found a client that has since ended: they must go somewhere to be refused).
  std::optional<store_actor> store_of(pd_ptr self, const std::string& peer, bool always = false) {
    if (peer.empty())
      return local;
    auto it = peers.find(peer);
    if (it == peers.end()) {
      if (peers.size() >= max_peer_clients && !always)
        return std::nullopt;
      it = peers.emplace(peer, peer_store(peer)).first;
      self->monitor(it->second); // it ends itself when idle (store_client_options::idle_exit_ms)
    }
    return it->second;
  }
  std::string peer_of(uint64_t request_id) const {
    const auto* r = request_peer.find(request_id);
    return r ? r->peer : std::string();
  }
};

// One store's share of a connector step, and where its orders sit in the whole step.
struct pd_part {
  store_actor store;
  connector_step sub;
  std::vector<size_t> load_index, save_index;
};

connector_actor::behavior_type pd_connector(pd_ptr self, offload_options options, store_actor local,
                                            std::function<store_actor(const std::string&)> peer_store,
                                            trace_tap tap) {
  auto& st = self->state;
  st.policy = make_connector_policy("pd", options);
  st.local = std::move(local);
  st.peer_store = std::move(peer_store);
  st.io = door("connector", std::move(tap));
  // A peer's client ended (idle, or its actor failed): forget it; the next lookup spawns another.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& peers = self->state.peers;
    for (auto it = peers.begin(); it != peers.end(); ++it)
      if (caf::actor_cast<caf::actor_addr>(it->second) == dm.source) {
        peers.erase(it);
        return;
      }
  });
  return {
    [=](const connector_lookup& lookup) -> caf::result<connector_lookup_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), lookup);
      const bool remote = !lookup.peer.empty();
      auto store = st.store_of(self, lookup.peer);
      if (!store) {
        spdlog::warn("connector: request {} names the prefill node {}, but this node already keeps {} peers' "
                     "clients (the most it keeps); the request recomputes",
                     lookup.request_id, lookup.peer, max_peer_clients);
        return st.io.reply(self, st.policy->lookup_answered(lookup, {}));
      }
      if (remote)
        st.request_peer.put(lookup.request_id, {lookup.peer, lookup.transfer_id});
      return lookup_through(self, *store, lookup, remote);
    },
    [=](const connector_step& step) -> caf::result<connector_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      if (auto refused = out_of_order(self, step))
        return *refused;
      // Split by store: a request's loads and their unpins go to its peer (the unpins with the
      // release of its lease there); saves, commits, evictions and leases stay here. This node's
      // store always gets a step (its answer carries the stats).
      auto parts = std::make_shared<std::map<std::string, pd_part>>();
      auto part = [&](const std::string& peer) -> pd_part& {
        auto it = parts->find(peer);
        if (it == parts->end()) {
          it = parts->emplace(peer, pd_part{}).first;
          it->second.store = *st.store_of(self, peer, true);
          it->second.sub.header = step.header;
        }
        return it->second;
      };
      part("").sub.evict_all = step.evict_all;
      part("").sub.leases = step.leases;
      std::map<std::string, std::vector<std::string>> releases; // per peer: transfer ids
      for (const auto& f : step.finished) {
        auto* pr = f.is_save ? nullptr : st.request_peer.find(f.request_id);
        part(pr ? pr->peer : std::string()).sub.finished.push_back(f);
        if (pr && !pr->transfer_id.empty()) {
          releases[pr->peer].push_back(std::move(pr->transfer_id));
          pr->transfer_id.clear(); // once per request
        }
      }
      for (size_t i = 0; i < step.loads.size(); ++i) {
        auto& p = part(st.peer_of(step.loads[i].request_id));
        p.sub.loads.push_back(step.loads[i]);
        p.load_index.push_back(i);
      }
      for (size_t i = 0; i < step.saves.size(); ++i) {
        auto& p = part("");
        p.sub.saves.push_back(step.saves[i]);
        p.save_index.push_back(i);
      }
      auto requester = self->current_sender();
      auto rp = self->make_response_promise<connector_step_done>();
      std::vector<store_actor> to;
      std::vector<store_step> steps;
      for (auto& [peer, p] : *parts) {
        auto to_store = st.policy->step(p.sub);
        store_step s = to_store ? std::move(*to_store) : store_step{};
        if (auto r = releases.find(peer); r != releases.end())
          s.releases = std::move(r->second);
        auto& stamp = st.stamps.try_emplace(p.store.id(), sequence_stamp(1)).first->second;
        s.header = command_header{stamp.epoch(), stamp.next()};
        to.push_back(p.store);
        steps.push_back(std::move(s));
      }
      st.io.request_all(self, to, std::move(steps), [=](std::vector<store_step_done>& answers,
                                                        const caf::error& failure) mutable {
        auto& st = self->state;
        if (failure)
          return st.io.fail(rp, requester, "connector_step_done", failure);
        connector_step_done done;
        done.header = step.header;
        done.loads.resize(step.loads.size());
        done.saves.resize(step.saves.size());
        try {
          size_t next = 0; // answers come in the order of `parts`
          for (auto& [peer, p] : *parts) {
            auto answered = st.policy->step_answered(p.sub, answers[next++]);
            for (size_t k = 0; k < p.load_index.size(); ++k)
              done.loads[p.load_index[k]] = std::move(answered.loads[k]);
            for (size_t k = 0; k < p.save_index.size(); ++k)
              done.saves[p.save_index[k]] = std::move(answered.saves[k]);
            if (peer.empty()) {
              done.stats = answered.stats;
              done.num_evicted = answered.num_evicted;
              done.granularity = answered.granularity;
              done.leases = std::move(answered.leases);
            }
          }
        } catch (const std::exception& e) {
          return st.io.fail(rp, requester, "connector_step_done", caf::make_error(caf::sec::invalid_argument, e.what()));
        }
        st.io.deliver(rp, requester, std::move(done));
      });
      return rp;
    },
  };
}

} // namespace

connector_actor spawn_pd_connector(caf::actor_system& sys, offload_options policy, store_actor local,
                                   std::function<store_actor(const std::string&)> peer_store, trace_tap tap) {
  return sys.spawn(pd_connector, std::move(policy), std::move(local), std::move(peer_store), std::move(tap));
}

} // namespace ordo
