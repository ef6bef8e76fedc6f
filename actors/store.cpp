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
  door io;
  static inline const char* name = "store";
};

using self_ptr = store_actor::stateful_pointer<store_state>;

store_actor::behavior_type store(self_ptr self, uint8_t* arena, size_t capacity, trace_tap tap) {
  if (arena && capacity > 0)
    self->state.core = std::make_unique<host_store>(arena, capacity);
  self->state.io = door("store", std::move(tap));
  return {
    [=](const store_contains& q) -> store_contains_done {
      auto& st = self->state;
      st.io.received(self->current_sender(), q);
      return st.io.reply(self, apply(st.core.get(), q));
    },
    [=](const store_step& step) -> caf::result<store_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      if (auto why = st.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
        spdlog::critical("store: {}", why);
        return st.io.refuse(self, "store_step_done", why);
      }
      auto applied = apply(st.core.get(), step);
      if (auto& rec = st.io.tap().recorder)
        for (const auto& g : applied.done.pins)
          rec->store_verdict(g.key, g.status);
      for (const auto& k : applied.commits_unreserved)
        spdlog::warn("store: commit of an object with no reservation (hash {:016x})", k.hash);
      for (const auto& k : applied.unpins_unpinned)
        spdlog::warn("store: unpin of an object that is not pinned (hash {:016x})", k.hash);
      return st.io.reply(self, std::move(applied.done));
    },
    [=](const store_corrupt& c) -> int32_t {
      auto& st = self->state;
      st.io.received(self->current_sender(), c);
      return st.core ? st.core->test_corrupt_all(c.kind) : 0;
    },
  };
}

} // namespace

store_actor spawn_store(caf::actor_system& sys, uint8_t* arena, size_t capacity_bytes, trace_tap tap) {
  return sys.spawn(store, arena, capacity_bytes, std::move(tap));
}

} // namespace ordo
