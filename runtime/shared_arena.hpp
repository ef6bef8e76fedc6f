// The byte plane between `ordo store` and the nodes of its host (docs/store.md, SPEC D5): the
// store hands its sealed memfd arena to each session over an abstract AF_UNIX socket
// (SCM_RIGHTS), and the node maps it into an address window it reserved once, one session's
// arena at its own offset, so the model runner's single host pointer reaches every session's
// memory and a transfer granted by an ended session still lands in that session's pages.
// Pure POSIX: no CAF, no device.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <optional>
#include <mutex>
#include <thread>
#include <vector>

namespace ordo {

// Store side: serves the arena's fd to every local peer of the same uid that connects to the
// abstract socket `name` (no leading NUL: it is added). One thread; the destructor stops it.
// Throws std::runtime_error naming the step that failed (e.g. the name is taken).
class arena_fd_server {
public:
  arena_fd_server(std::string name, int arena_fd, uint64_t arena_bytes);
  ~arena_fd_server();
  arena_fd_server(const arena_fd_server&) = delete;
  arena_fd_server& operator=(const arena_fd_server&) = delete;

  const std::string& name() const { return name_; }
  uint64_t served() const { return served_.load(); }
  uint64_t refused() const { return refused_.load(); }

private:
  void run();

  std::string name_;
  int arena_fd_;
  uint64_t arena_bytes_;
  int listen_fd_ = -1;
  int stop_fd_ = -1; // eventfd: written by the destructor
  std::atomic<uint64_t> served_{0}, refused_{0};
  std::thread thread_;
};

// Node side: connects to the abstract socket `name`, receives the arena's fd and its size.
// Throws std::runtime_error naming the socket and what failed (no such socket: the store is on
// another host or gone; a wrong size; no fd in the message); waits at most `timeout_ms`.
struct received_arena {
  int fd = -1;
  uint64_t bytes = 0;
};
received_arena receive_arena_fd(const std::string& name, int timeout_ms);

// First-fit ranges of [0, size) at multiples of `align`: host_window's slots, and the staging
// arena of a node whose store transport is "tcp". Not thread-safe.
class range_allocator {
public:
  range_allocator(uint64_t size, uint64_t align) : size_(size), align_(align) {}
  // The offset of `bytes` free bytes, or nullopt when no free range is large enough.
  std::optional<uint64_t> take(uint64_t bytes);
  // Gives back the range taken at `offset` and returns its size (0 if none starts there).
  uint64_t give(uint64_t offset);
  uint64_t used_bytes() const;
  uint64_t size() const { return size_; }

private:
  struct range {
    uint64_t offset, bytes;
  };
  uint64_t size_, align_;
  std::vector<range> used_; // sorted by offset
};

// Node side: one reserved range of address space (PROT_NONE, no memory behind it) in which
// arenas are mapped shared and read-write at offsets the window chooses (first fit, 2 MiB
// aligned). Thread-safe: a node's store clients (one per P/D peer) attach and detach from their
// own threads.
class host_window {
public:
  explicit host_window(uint64_t bytes);
  ~host_window();
  host_window(const host_window&) = delete;
  host_window& operator=(const host_window&) = delete;

  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }
  // Maps `bytes` of `fd` (from offset 0) into the window; returns the offset. Throws
  // std::runtime_error when no free range is large enough or mmap fails.
  uint64_t attach(int fd, uint64_t bytes);
  // Replaces the mapping at `offset` with reserved, inaccessible address space again.
  void detach(uint64_t offset);
  uint64_t mapped_bytes() const;

private:
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  mutable std::mutex mutex_; // guards ranges_ and the mappings they describe
  range_allocator ranges_;
};

} // namespace ordo
