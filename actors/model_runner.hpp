// model_runner actor: owns the device, the model and the step executor.
//   ready ──step_plan (seq = last + 1)──► enqueued (promise kept) ──step_done from the device
//   callback──► reply to the scheduler ──► ready
// NOTE(nonblocking): the handler only enqueues device work; completion arrives as a message
// posted by a device host callback, so no CAF worker waits on the device.
#pragma once

#include <memory>

#include <caf/actor_system.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"
#include "runtime/device.hpp"
#include "runtime/model.hpp"
#include "runtime/step_executor.hpp"

namespace ordo {

model_runner_actor spawn_model_runner(caf::actor_system& sys, std::shared_ptr<device> dev,
                                      std::shared_ptr<model> mdl, const step_executor_options& options,
                                      trace_tap tap = {});

} // namespace ordo
