#include "actors/store.hpp"

#include <memory>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/host_store.hpp"
#include "runtime/sequence_check.hpp"

namespace ordo {

namespace {

struct store_state {
  std::unique_ptr<host_store> core; // null: nothing is stored
  sequence_check steps;
  static inline const char* name = "store";
};

using self_ptr = store_actor::stateful_pointer<store_state>;

store_actor::behavior_type store(self_ptr self, uint8_t* arena, size_t capacity) {
  if (arena && capacity > 0)
    self->state.core = std::make_unique<host_store>(arena, capacity);
  return {
    [=](const store_contains& q) -> store_contains_done {
      auto* core = self->state.core.get();
      store_contains_done out;
      out.present.reserve(q.keys.size());
      bool leading = true;
      for (const auto& k : q.keys) {
        bool here = core && core->contains(k);
        out.present.push_back(here ? 1 : 0);
        leading = leading && here;
        out.num_leading_committed += leading ? 1 : 0;
      }
      return out;
    },
    [=](const store_step& step) -> caf::result<store_step_done> {
      auto& st = self->state;
      if (auto why = st.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
        spdlog::critical("store: {}", why);
        return caf::make_error(caf::sec::invalid_argument, why);
      }
      store_step_done out;
      out.header = step.header;
      auto* core = st.core.get();
      if (core) {
        for (const auto& k : step.commits)
          if (!core->commit(k))
            spdlog::warn("store: commit of an object with no reservation (hash {:016x})", k.hash);
        for (const auto& k : step.aborts)
          core->abort(k);
        for (const auto& k : step.unpins)
          if (!core->unpin(k))
            spdlog::warn("store: unpin of an object that is not pinned (hash {:016x})", k.hash);
        if (step.evict_all)
          out.num_evicted = core->evict_all();
      }
      for (const auto& o : step.pins) {
        store_grant g;
        g.key = o.key;
        if (!core) {
          g.status = to_string(pin_status::missing);
        } else {
          object_header h;
          size_t offset = 0;
          // NOTE(verify): the layout fingerprint is the namespace (it covers page and state
          // layouts); the boundary is the hash the object is filed under.
          auto status = core->pin(o.key, o.key.namespace_id, o.key.hash, h, offset);
          g.status = to_string(status);
          if (status == pin_status::ok && (h.data_bytes != o.data_bytes || h.first_token != o.first_token ||
                                            h.tokens != o.tokens || h.num_blocks != o.num_blocks)) {
            core->unpin(o.key);
            g.status = "object describes other tokens";
          } else if (status == pin_status::ok) {
            g.ok = true;
            g.data_offset = offset;
            g.data_bytes = h.data_bytes;
          }
        }
        out.pins.push_back(std::move(g));
      }
      for (const auto& o : step.reserves) {
        store_grant g;
        g.key = o.key;
        if (!core) {
          g.status = to_string(reserve_status::no_space);
        } else {
          object_header h;
          h.kind = o.key.kind;
          h.layout_fingerprint = o.key.namespace_id;
          h.boundary_hash = o.key.hash;
          h.first_token = o.first_token;
          h.tokens = o.tokens;
          h.num_blocks = o.num_blocks;
          h.data_bytes = o.data_bytes;
          size_t offset = 0;
          auto status = core->reserve(o.key, h, o.data_bytes, offset);
          g.status = to_string(status);
          g.ok = status == reserve_status::ok;
          if (g.ok) {
            g.data_offset = offset;
            g.data_bytes = o.data_bytes;
          }
        }
        out.reserves.push_back(std::move(g));
      }
      out.stats = core ? core->stats() : store_stats{};
      return out;
    },
    [=](const store_corrupt& c) -> int32_t {
      auto* core = self->state.core.get();
      return core ? core->test_corrupt_all(c.kind) : 0;
    },
  };
}

} // namespace

store_actor spawn_store(caf::actor_system& sys, uint8_t* arena, size_t capacity_bytes) {
  return sys.spawn(store, arena, capacity_bytes);
}

} // namespace ordo
