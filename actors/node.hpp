// The node bootstrap: builds the device and the model, spawns the actors (store, connector,
// block_pool, model_runner, scheduler, frontend) and starts the HTTP server.
// Runs on: the caller's thread (start, drain_and_stop); the actors on CAF's workers; HTTP on
// its own thread; device work on the device's stream threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/config.hpp"

namespace ordo {

// Test-only switches, never set from a config file.
struct node_hooks {
  // Removes the compute stream's wait for the step input upload (runtime/step_executor.hpp).
  bool test_drop_upload_edge = false;
  // Leaves out the load stream's wait for the step's clears (the seed's bug, DESIGN §2.1).
  bool test_drop_clear_load_edge = false;
};

class node {
public:
  explicit node(node_config config, node_hooks hooks = {});
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
  const node_config& config() const;
  // Prometheus text, as GET /metrics serves it.
  std::string render_metrics() const;

  // Test hook: flips one data byte of every committed host-tier object of `kind` (object_kind);
  // returns how many were changed. Their next load must find the checksum wrong (SPEC C6).
  int32_t test_corrupt_store(uint8_t kind);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace ordo
