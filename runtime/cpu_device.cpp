// The CPU device: each stream is a worker thread draining a queue of operations; an event is a
// marker in one stream's queue that completes when the worker reaches it. With chaos on, every
// operation is delayed by a seeded pseudo-random amount before it runs, so work on different
// streams interleaves in many orders and a missing wait shows up as a real race.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/device.hpp"

namespace ordo {

const char* to_string(stream_kind kind) {
  switch (kind) {
    case stream_kind::compute: return "compute";
    case stream_kind::load: return "load";
    case stream_kind::save: return "save";
  }
  return "?";
}

void device::enqueue_host_work(stream_kind, std::function<void()>) {
  throw std::logic_error("enqueue_host_work: " + name() + " does not run host work as stream work");
}

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class cpu_device final : public device {
public:
  explicit cpu_device(const cpu_device_options& options) : options_(options) {
    for (int i = 0; i < num_stream_kinds; ++i) {
      auto& s = streams_[i];
      s.chaos_state = options.chaos_seed ^ (0x5151ULL * static_cast<uint64_t>(i + 1));
      s.worker = std::thread([this, i] { run_stream(i); });
    }
  }

  ~cpu_device() override {
    for (auto& s : streams_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.stopping = true;
      s.cv.notify_all();
    }
    for (auto& s : streams_)
      s.worker.join();
  }

  std::string name() const override {
    return options_.chaos_seed ? "cpu(chaos=" + std::to_string(options_.chaos_seed) + ")" : "cpu";
  }

  void* alloc_device(size_t bytes) override { return zeroed(bytes); }
  void free_device(void* ptr) override { std::free(ptr); }
  void* alloc_host_pinned(size_t bytes) override { return zeroed(bytes); }
  void free_host_pinned(void* ptr) override { std::free(ptr); }

  void copy_async(stream_kind stream, void* dst, const void* src, size_t bytes) override {
    push(stream, op{op_kind::work, [=] { std::memmove(dst, src, bytes); }, 0});
  }

  void fill_async(stream_kind stream, void* dst, uint8_t value, size_t bytes) override {
    push(stream, op{op_kind::work, [=] { std::memset(dst, value, bytes); }, 0});
  }

  event_id record(stream_kind stream) override {
    event_id id;
    {
      std::lock_guard<std::mutex> lock(events_mutex_);
      id = ++last_event_;
      pending_events_.emplace(id, true);
    }
    push(stream, op{op_kind::record, nullptr, id});
    return id;
  }

  void wait(stream_kind stream, event_id event) override {
    if (query(event))
      return;
    push(stream, op{op_kind::wait, nullptr, event});
  }

  bool query(event_id event) override {
    std::lock_guard<std::mutex> lock(events_mutex_);
    return event <= last_event_ && pending_events_.count(event) == 0;
  }

  void host_callback(stream_kind stream, std::function<void()> fn) override {
    push(stream, op{op_kind::work, std::move(fn), 0});
  }

  void synchronize() override {
    for (auto& s : streams_) {
      std::unique_lock<std::mutex> lock(s.mutex);
      s.idle_cv.wait(lock, [&] { return s.queue.empty() && !s.busy; });
    }
  }

  bool runs_host_work() const override { return true; }

  void enqueue_host_work(stream_kind stream, std::function<void()> fn) override {
    push(stream, op{op_kind::work, std::move(fn), 0});
  }

private:
  enum class op_kind : uint8_t { work, record, wait };
  struct op {
    op_kind kind;
    std::function<void()> fn;
    event_id event;
  };
  struct stream_state {
    std::mutex mutex;
    std::condition_variable cv;
    std::condition_variable idle_cv;
    std::deque<op> queue;
    bool busy = false;
    bool stopping = false;
    uint64_t chaos_state = 0; // touched only by the worker
    std::thread worker;
  };

  static void* zeroed(size_t bytes) {
    // 64-byte alignment so every field row is aligned like on a GPU allocation.
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!p)
      throw std::bad_alloc();
    std::memset(p, 0, rounded ? rounded : 64);
    return p;
  }

  void push(stream_kind stream, op o) {
    auto& s = streams_[static_cast<int>(stream)];
    std::lock_guard<std::mutex> lock(s.mutex);
    s.queue.push_back(std::move(o));
    s.cv.notify_one();
  }

  void chaos_delay(stream_state& s) {
    if (!options_.chaos_seed)
      return;
    uint64_t r = splitmix64(s.chaos_state);
    if ((r & 3) == 0)
      return; // a quarter of the operations run at once, so short and long gaps both occur
    auto us = (r >> 8) % (options_.chaos_max_delay_us + 1);
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }

  // Runs on the stream's worker thread.
  void run_stream(int index) {
    auto& s = streams_[index];
    for (;;) {
      op o;
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.cv.wait(lock, [&] { return s.stopping || !s.queue.empty(); });
        if (s.queue.empty())
          return;
        o = std::move(s.queue.front());
        s.queue.pop_front();
        s.busy = true;
      }
      switch (o.kind) {
        case op_kind::work:
          chaos_delay(s);
          o.fn();
          break;
        case op_kind::record: {
          std::lock_guard<std::mutex> lock(events_mutex_);
          pending_events_.erase(o.event);
          events_cv_.notify_all();
          break;
        }
        case op_kind::wait: {
          std::unique_lock<std::mutex> lock(events_mutex_);
          events_cv_.wait(lock, [&] { return pending_events_.count(o.event) == 0; });
          break;
        }
      }
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.busy = false;
        if (s.queue.empty())
          s.idle_cv.notify_all();
      }
    }
  }

  cpu_device_options options_;
  stream_state streams_[num_stream_kinds];
  std::mutex events_mutex_;
  std::condition_variable events_cv_;
  event_id last_event_ = 0;
  std::unordered_map<event_id, bool> pending_events_; // recorded, not yet reached
};

} // namespace

std::unique_ptr<device> make_cpu_device(const cpu_device_options& options) {
  return std::make_unique<cpu_device>(options);
}

} // namespace ordo
