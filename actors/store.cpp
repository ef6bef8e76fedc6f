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
    [=](const store_contains& q) -> store_contains_done { return apply(self->state.core.get(), q); },
    [=](const store_step& step) -> caf::result<store_step_done> {
      auto& st = self->state;
      if (auto why = st.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
        spdlog::critical("store: {}", why);
        return caf::make_error(caf::sec::invalid_argument, why);
      }
      auto applied = apply(st.core.get(), step);
      for (const auto& k : applied.commits_unreserved)
        spdlog::warn("store: commit of an object with no reservation (hash {:016x})", k.hash);
      for (const auto& k : applied.unpins_unpinned)
        spdlog::warn("store: unpin of an object that is not pinned (hash {:016x})", k.hash);
      return std::move(applied.done);
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
