#include "actors/connector.hpp"

#include <map>
#include <memory>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/sequence_check.hpp"
#include "runtime/transfer_routes.hpp"

namespace ordo {

namespace {

struct connector_state {
  std::optional<transfer_routes> core;
  connector_stores stores;
  std::map<store_ref, store_actor> peers; // P/D: the prefill nodes' store clients
  sequence_check steps;
  door io;
  static inline const char* name = "connector";

  // The peers' store clients end with the connector (the actor system waits for every actor).
  ~connector_state() {
    for (auto& [ref, client] : peers)
      caf::anon_send_exit(client, caf::exit_reason::user_shutdown);
  }
};

using self_ptr = connector_actor::stateful_pointer<connector_state>;
using lookup_promise = caf::typed_response_promise<connector_lookup_done>;
using step_promise = caf::typed_response_promise<connector_step_done>;

// A connector step out of (epoch, seq) order is refused and changes nothing.
std::optional<caf::error> out_of_order(self_ptr self, const connector_step& step) {
  auto& st = self->state;
  auto why = st.steps.accept(step.header.epoch, step.header.seq);
  if (why.empty())
    return std::nullopt;
  spdlog::critical("connector: {}", why);
  return st.io.refuse(self, "connector_step_done", why);
}

// The actor of `ref`: a leaf's own store, or a peer's client, spawned on first use; it ends itself
// when idle (store_client_options::idle_exit_ms), and the down handler forgets it.
store_actor store_of(self_ptr self, const store_ref& ref) {
  auto& st = self->state;
  if (ref.peer.empty())
    return st.stores.leaves.at(ref.leaf);
  auto it = st.peers.find(ref);
  if (it == st.peers.end()) {
    it = st.peers.emplace(ref, st.stores.peer_store(ref.peer)).first;
    self->monitor(it->second);
  }
  return it->second;
}

// What a lookup's step tells the shell besides its answer: lines to log, clients to hold, a hit.
void observe(self_ptr self, const lookup_next& next) {
  auto& st = self->state;
  for (const auto& note : next.notes)
    spdlog::warn("{}", note);
  for (const auto& ref : next.opened)
    store_of(self, ref);
  if (next.hit_leaf && *next.hit_leaf < st.stores.hits.size())
    st.stores.hits[*next.hit_leaf]->fetch_add(1);
}

// Asks the store the core names, then the next one, until the core answers (first hit wins).
void ask(self_ptr self, connector_lookup lookup, lookup_next next, lookup_promise rp, caf::strong_actor_ptr requester) {
  auto& st = self->state;
  observe(self, next);
  if (next.done)
    return st.io.deliver(rp, requester, std::move(*next.done));
  const lookup_ask asked = *next.ask;
  st.io.request(
      self, store_of(self, asked.store), asked.probe,
      [=](store_contains_done& found, uint64_t) mutable {
        ask(self, lookup, self->state.core->lookup_answered(lookup, asked, found), rp, requester);
      },
      [=](caf::error& err) mutable { self->state.io.fail(rp, requester, "connector_lookup_done", err); });
}

// Sends each store its step at once; their answers, merged in order, answer the connector step.
void request_parts(self_ptr self, std::shared_ptr<const split_step> split, step_promise rp,
                   caf::strong_actor_ptr requester) {
  auto& st = self->state;
  std::vector<store_actor> to;
  std::vector<store_step> steps;
  for (const auto& part : split->parts) {
    to.push_back(store_of(self, part.store));
    steps.push_back(part.step);
  }
  st.io.request_all(self, to, std::move(steps), [=](std::vector<store_step_done>& answers, const caf::error& failure) mutable {
    auto& st = self->state;
    if (failure)
      return st.io.fail(rp, requester, "connector_step_done", failure);
    try {
      st.io.deliver(rp, requester, st.core->merge(*split, answers));
    } catch (const std::exception& e) {
      st.io.fail(rp, requester, "connector_step_done", caf::make_error(caf::sec::invalid_argument, e.what()));
    }
  });
}

connector_actor::behavior_type connector(self_ptr self, route_table routes, connector_stores stores, trace_tap tap) {
  auto& st = self->state;
  st.core.emplace(std::move(routes));
  st.stores = std::move(stores);
  st.io = door("connector", std::move(tap));
  // A peer's client ended (idle, or its actor failed): forget it; its next use spawns another.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto it = st.peers.begin(); it != st.peers.end(); ++it)
      if (caf::actor_cast<caf::actor_addr>(it->second) == dm.source) {
        st.core->forget_peer(it->first);
        st.peers.erase(it);
        return;
      }
  });
  return {
    // scheduler: a request's lookup, before its first pool step.
    [=](const connector_lookup& lookup) -> caf::result<connector_lookup_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), lookup);
      auto next = st.core->start_lookup(lookup);
      if (next.done) {
        observe(self, next);
        return st.io.reply(self, std::move(*next.done));
      }
      auto requester = self->current_sender(); // before the promise takes the request over
      auto rp = self->make_response_promise<connector_lookup_done>();
      ask(self, lookup, std::move(next), rp, requester);
      return rp;
    },
    // scheduler: after a pool step, (epoch, seq) contiguous.
    [=](const connector_step& step) -> caf::result<connector_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      if (auto refused = out_of_order(self, step))
        return *refused;
      auto split = std::make_shared<const split_step>(st.core->split(step));
      if (split->parts.empty()) // no store to ask (none)
        return st.io.reply(self, st.core->merge(*split, {}));
      auto requester = self->current_sender();
      auto rp = self->make_response_promise<connector_step_done>();
      request_parts(self, split, rp, requester);
      return rp;
    },
  };
}

} // namespace

connector_actor spawn_connector(caf::actor_system& sys, route_table routes, connector_stores stores, trace_tap tap) {
  return sys.spawn(connector, std::move(routes), std::move(stores), std::move(tap));
}

} // namespace ordo
