// What the connector actors share (actors/connector.cpp: connector and pd_connector,
// actors/multi_connector.cpp): the order check of connector steps (and, from runtime/, the bounded
// memory of the requests they have seen a lookup of).
#pragma once

#include <optional>

#include <caf/error.hpp>
#include <spdlog/spdlog.h>

#include "messages/connector.hpp"
#include "runtime/recent_requests.hpp"

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

} // namespace ordo
