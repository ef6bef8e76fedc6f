// The node bootstrap: builds the device and the model, spawns the actors (store, connector,
// block_pool, model_runner, scheduler, frontend) and starts the HTTP server.
// Runs on: the caller's thread (start, drain_and_stop); the actors on CAF's workers; HTTP on
// its own thread; device work on the device's stream threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <variant>

#include "messages/request.hpp"

#include "runtime/config.hpp"

namespace ordo {

class node {
public:
  explicit node(node_config config);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // Builds everything and starts serving; returns the bound port. Throws std::runtime_error
  // (e.g. the port is taken) with nothing left running.
  int start();
  // Stops accepting, lets in-flight requests finish (up to `timeout`), then stops everything.
  // Idempotent.
  void drain_and_stop(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  int port() const;
  // The actor port peers reach this node's host tier on (connector "pd"), else 0.
  int actor_port() const;
  const node_config& config() const;
  // The trace being recorded (trace.path), or "" when none.
  std::string trace_path() const;
  // Prometheus text, as GET /metrics serves it.
  std::string render_metrics() const;

  // Sends one request straight to the scheduler (no HTTP) and waits up to `timeout` for its
  // answer: the result, or a completion_failed (also for a timeout). For `ordo replay --node`.
  std::variant<completion_result, completion_failed> complete(const completion_request& request,
                                                              std::chrono::milliseconds timeout);
  // Evicts a tier as POST /admin/evict does; false if no answer came within `timeout`.
  bool evict(const evict_request& request, std::chrono::milliseconds timeout);

  // Test hook: flips one data byte of every committed host-tier object of `kind` (object_kind);
  // returns how many were changed. Their next load must find the checksum wrong (SPEC C6).
  int32_t test_corrupt_store(uint8_t kind);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace ordo
