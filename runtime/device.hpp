// The one device interface (DESIGN §2.2): memory, streams, events, host callbacks.
// Implementations: runtime/cpu_device (always built) and the HIP device (kernels/hip).
// Kernels are not launched through this interface directly: a kernel_table (kernels/kernel_table.hpp)
// turns each model op into work on a stream of a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ordo {

// The three streams of the model runner (DESIGN §2): compute, load = host→device,
// save = device→host. Work on one stream runs in enqueue order; across streams only events order it.
enum class stream_kind : uint8_t { compute = 0, load = 1, save = 2 };
inline constexpr int num_stream_kinds = 3;
const char* to_string(stream_kind kind);

// An event marks a point in one stream. Recording returns a fresh id; waiting on an id makes a
// stream hold back later work until every operation enqueued before the record has completed.
using event_id = uint64_t;

class device {
public:
  virtual ~device() = default;

  virtual std::string name() const = 0;

  // Device memory (on the CPU device: plain host memory). Zero-filled on allocation.
  virtual void* alloc_device(size_t bytes) = 0;
  virtual void free_device(void* ptr) = 0;
  // Page-locked host memory visible to copies (on the CPU device: plain host memory).
  virtual void* alloc_host_pinned(size_t bytes) = 0;
  virtual void free_host_pinned(void* ptr) = 0;
  // Pins and maps host memory this process did not allocate (a store server's shared arena,
  // mapped with mmap) so copies and kernels reach it like alloc_host_pinned memory; undone by
  // unregister_host once no queued work touches it. The CPU device needs neither.
  virtual void register_host(void* /*ptr*/, size_t /*bytes*/) {}
  virtual void unregister_host(void* /*ptr*/) {}

  // Copies `bytes` from `src` to `dst` on `stream`, ordered with the stream's other work.
  virtual void copy_async(stream_kind stream, void* dst, const void* src, size_t bytes) = 0;
  // Fills `bytes` at `dst` with `value`, on `stream`.
  virtual void fill_async(stream_kind stream, void* dst, uint8_t value, size_t bytes) = 0;

  // Marks the current end of `stream`.
  virtual event_id record(stream_kind stream) = 0;
  // Later work on `stream` waits until `event` has completed.
  virtual void wait(stream_kind stream, event_id event) = 0;
  // True once every operation before the record has completed. Never blocks.
  virtual bool query(event_id event) = 0;

  // Runs `fn` on a device-owned thread once all earlier work on `stream` has completed. Later
  // work on `stream` waits for `fn` to return. `fn` must not block on the device; it is how
  // completions become messages (the model runner never blocks a CAF worker).
  virtual void host_callback(stream_kind stream, std::function<void()> fn) = 0;

  // Blocks the calling thread until every stream is idle. For tests, startup and shutdown only.
  virtual void synchronize() = 0;

  // The CPU device runs host functions as stream work (its kernels are host functions);
  // a GPU device returns false and its kernel table launches device kernels instead.
  virtual bool runs_host_work() const { return false; }
  // Enqueues a host function as stream work (CPU device only: see runs_host_work()).
  virtual void enqueue_host_work(stream_kind stream, std::function<void()> fn);
};

// CPU device options. chaos_seed != 0 delays each queued operation by a pseudo-random amount
// drawn from that seed, so a missing dependency edge becomes a reproducible race.
struct cpu_device_options {
  uint64_t chaos_seed = 0;
  uint32_t chaos_max_delay_us = 2000;
};

std::unique_ptr<device> make_cpu_device(const cpu_device_options& options);

} // namespace ordo
