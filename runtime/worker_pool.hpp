// A fixed set of threads running posted jobs in order of posting: the node's request parser (one
// thread, actors/frontend.hpp) and the proxy's upstream calls (tools/proxy.cpp).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ordo {

class worker_pool {
public:
  explicit worker_pool(int threads = 1) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this] { run(); });
  }
  ~worker_pool() { stop(); } // runs what is queued, then joins
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

  // Runs what is queued, then joins (a job may call it: its own thread is not joined). Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_)
      if (t.joinable() && t.get_id() != std::this_thread::get_id())
        t.join();
  }

private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty())
          return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

} // namespace ordo
