#include "actors/block_pool.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/block_accounting.hpp"
#include "runtime/sequence_check.hpp"

namespace ordo {

namespace {

struct block_pool_state {
  std::unique_ptr<block_accounting> core;
  sequence_check order;
  door io;
  static inline const char* name = "block_pool";
};

block_pool_actor::behavior_type block_pool(block_pool_actor::stateful_pointer<block_pool_state> self,
                                          int32_t num_blocks, int32_t block_size, trace_tap tap) {
  self->state.core = std::make_unique<block_accounting>(num_blocks, block_size);
  self->state.io = door("block_pool", std::move(tap));
  return {
    [=](const pool_step& step) -> caf::result<pool_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      auto why = st.order.accept(step.header.epoch, step.header.seq);
      if (!why.empty()) {
        spdlog::error("block_pool: refused pool_step: {}", why);
        return st.io.refuse(self, "pool_step_done", why);
      }
      auto done = st.core->apply(step);
      spdlog::debug("block_pool: step ({}, {}): {} releases, {} commits, {} grows, {} images ready, evicted {} "
                    "blocks and {} images, {} units to clear, free {}, cached {}",
                    step.header.epoch, step.header.seq, step.releases.size(), step.commits.size(),
                    step.grows.size(), step.images_ready.size(), done.num_evicted, done.num_images_evicted,
                    done.clears.size(), done.num_free, done.num_cached);
      return st.io.reply(self, std::move(done));
    },
  };
}

} // namespace

block_pool_actor spawn_block_pool(caf::actor_system& sys, int32_t num_blocks, int32_t block_size, trace_tap tap) {
  return sys.spawn(block_pool, num_blocks, block_size, std::move(tap));
}

} // namespace ordo
