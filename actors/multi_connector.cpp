// The multi connector (kv_transfer.connector = "multi", SPEC E3, docs/pd.md): leaves composed in
// order. A lookup asks the leaves one after another and the first that holds KV of the prompt
// answers (its loads and their unpins go to it); every save goes to every leaf, and a save two
// leaves grant is written by the same step at both places (transfer_grant.copies), committed or
// aborted at each leaf that granted it; leases go to the P/D leaves. Each leaf is a connector
// actor of its own and gets its own (epoch, seq) sequence of connector steps from this one.
// NOTE(freed-after-every-leaf): a block's bytes are read by every leaf's copy inside the step
// that saves it, and the scheduler frees blocks only after that step's step_done, so no block is
// reused before every leaf is done with it.
#include "actors/connector.hpp"

#include <memory>
#include <unordered_map>

#include <caf/all.hpp>

#include "actors/connector_shell.hpp"
#include "runtime/host_store.hpp"
#include "runtime/sequence_check.hpp"

namespace ordo {

namespace {

struct leaf_state {
  multi_leaf spec;
  sequence_stamp stamp{1};
};

struct multi_state {
  std::vector<leaf_state> leaves;
  recent_requests<size_t> winner; // request → the leaf whose coverage it loads
  // Saves granted and not yet committed or aborted: the leaves that granted each.
  std::unordered_map<object_key, std::vector<size_t>, object_key_hash> saving;
  sequence_check steps;
  door io;
  static inline const char* name = "connector";

  size_t winner_of(uint64_t request_id) const {
    const size_t* leaf = winner.find(request_id);
    return leaf ? *leaf : 0;
  }
};

using multi_ptr = connector_actor::stateful_pointer<multi_state>;

// Asks leaf `i` and, while nothing is found, the leaves after it; the first hit answers.
void lookup_from(multi_ptr self, size_t i, connector_lookup lookup, caf::typed_response_promise<connector_lookup_done> rp,
                 caf::strong_actor_ptr requester) {
  auto& st = self->state;
  st.io.request(
      self, st.leaves[i].spec.actor, lookup,
      [=](connector_lookup_done& done, uint64_t) mutable {
        auto& st = self->state;
        if (done.cpu_tokens == 0 && i + 1 < st.leaves.size())
          return lookup_from(self, i + 1, std::move(lookup), rp, requester);
        st.winner.put(lookup.request_id, i);
        if (done.cpu_tokens > 0)
          st.leaves[i].spec.hits->fetch_add(1);
        done.connector = "multi:" + st.leaves[i].spec.name;
        st.io.deliver(rp, requester, std::move(done));
      },
      [=](caf::error& err) mutable { self->state.io.fail(rp, requester, "connector_lookup_done", err); });
}

connector_actor::behavior_type multi_connector(multi_ptr self, std::vector<multi_leaf> leaves, trace_tap tap) {
  auto& st = self->state;
  for (auto& l : leaves)
    st.leaves.push_back({std::move(l)});
  st.io = door("connector", std::move(tap));
  return {
    [=](const connector_lookup& lookup) -> caf::result<connector_lookup_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), lookup);
      auto requester = self->current_sender();
      auto rp = self->make_response_promise<connector_lookup_done>();
      lookup_from(self, 0, lookup, rp, requester);
      return rp;
    },
    [=](const connector_step& step) -> caf::result<connector_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      if (auto refused = out_of_order(self, step))
        return *refused;
      const size_t n = st.leaves.size();
      std::vector<connector_step> subs(n); // one step per leaf
      auto load_index = std::make_shared<std::vector<std::vector<size_t>>>(n);
      auto lease_index = std::make_shared<std::vector<std::vector<size_t>>>(n);
      for (size_t i = 0; i < n; ++i) {
        auto& sub = subs[i];
        sub.header = {st.leaves[i].stamp.epoch(), st.leaves[i].stamp.next()};
        sub.evict_all = step.evict_all;
        sub.saves = step.saves; // saves fan out
      }
      for (const auto& f : step.finished) {
        if (!f.is_save) {
          subs[st.winner_of(f.request_id)].finished.push_back(f);
          continue;
        }
        auto it = st.saving.find(f.key);
        if (it == st.saving.end())
          continue; // granted by no leaf: nothing to commit or abort
        for (size_t i : it->second)
          subs[i].finished.push_back(f);
        st.saving.erase(it);
      }
      for (size_t k = 0; k < step.loads.size(); ++k) {
        size_t i = st.winner_of(step.loads[k].request_id);
        subs[i].loads.push_back(step.loads[k]);
        (*load_index)[i].push_back(k);
      }
      for (size_t k = 0; k < step.leases.size(); ++k)
        for (size_t i = 0; i < n; ++i)
          if (st.leaves[i].spec.takes_leases) {
            subs[i].leases.push_back(step.leases[k]);
            (*lease_index)[i].push_back(k);
          }
      auto requester = self->current_sender();
      auto rp = self->make_response_promise<connector_step_done>();
      std::vector<connector_actor> to;
      for (const auto& l : st.leaves)
        to.push_back(l.spec.actor);
      st.io.request_all(self, to, std::move(subs), [=](std::vector<connector_step_done>& answers,
                                                        const caf::error& failure) mutable {
        auto& st = self->state;
        if (failure)
          return st.io.fail(rp, requester, "connector_step_done", failure);
        connector_step_done done;
        done.header = step.header;
        done.loads.resize(step.loads.size());
        done.leases.resize(step.leases.size());
        for (size_t k = 0; k < step.leases.size(); ++k)
          done.leases[k].request_id = step.leases[k].request_id;
        for (size_t i = 0; i < n; ++i) {
          auto& a = answers[i];
          const uint64_t base = st.leaves[i].spec.window_offset;
          if (a.loads.size() != (*load_index)[i].size() || a.saves.size() != step.saves.size() ||
              a.leases.size() != (*lease_index)[i].size())
            return st.io.fail(rp, requester, "connector_step_done",
                              caf::make_error(caf::sec::invalid_argument,
                                              "leaf " + st.leaves[i].spec.name + " answered another number of orders"));
          for (size_t k = 0; k < a.loads.size(); ++k) {
            auto g = std::move(a.loads[k]);
            if (g.ok)
              g.data_offset += base;
            done.loads[(*load_index)[i][k]] = std::move(g);
          }
          for (size_t k = 0; k < a.leases.size(); ++k) {
            auto& into = done.leases[(*lease_index)[i][k]];
            into.num_objects += a.leases[k].num_objects;
            into.lease_ms = std::max(into.lease_ms, a.leases[k].lease_ms);
          }
          done.num_evicted += a.num_evicted;
        }
        done.stats = answers[0].stats;
        done.granularity = answers[0].granularity;
        // A save: the first leaf that granted it is the grant, the others its copies; if none
        // granted, "exists" wins (the bytes are stored), else the first leaf's refusal.
        for (size_t k = 0; k < step.saves.size(); ++k) {
          transfer_grant g;
          std::vector<size_t> granted;
          for (size_t i = 0; i < n; ++i) {
            const auto& a = answers[i].saves[k];
            if (!a.ok)
              continue;
            const uint64_t at = a.data_offset + st.leaves[i].spec.window_offset;
            if (granted.empty()) {
              g = a;
              g.data_offset = at;
            } else {
              g.copies.push_back(at);
            }
            granted.push_back(i);
          }
          if (granted.empty()) {
            g = answers[0].saves[k];
            for (size_t i = 0; i < n; ++i)
              if (answers[i].saves[k].status == "exists")
                g = answers[i].saves[k];
          } else {
            st.saving[step.saves[k].object.key] = std::move(granted);
          }
          done.saves.push_back(std::move(g));
        }
        st.io.deliver(rp, requester, std::move(done));
      });
      return rp;
    },
  };
}

} // namespace

connector_actor spawn_multi_connector(caf::actor_system& sys, std::vector<multi_leaf> leaves, trace_tap tap) {
  return sys.spawn(multi_connector, std::move(leaves), std::move(tap));
}

} // namespace ordo
