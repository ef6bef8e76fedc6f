// The one thread pool: a fixed set of threads running posted jobs in order of posting. The node's
// request parser (one thread, actors/frontend.hpp), the proxy's upstream calls
// (tools/proxy/proxy.cpp) and the object checksum's pieces (runtime/checksum.cpp, for_each_index).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
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

  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

  // Runs fn(i) for every i < n on the calling thread and at most `helpers` of the pool's threads,
  // and returns when every call has returned. A helper that starts after the caller ran out of
  // indices takes no part (it never touches fn), so a busy pool only costs parallelism.
  void for_each_index(size_t n, unsigned helpers, const std::function<void(size_t)>& fn) {
    struct shared_job {
      std::atomic<size_t> next{0};
      size_t n = 0;
      const std::function<void(size_t)>* fn = nullptr;
      std::mutex m;
      std::condition_variable idle;
      unsigned busy = 0;
      bool closed = false; // the caller drained the indices: late helpers return at once
      void drain() {
        for (size_t i; (i = next.fetch_add(1)) < n;)
          (*fn)(i);
      }
    };
    auto job = std::make_shared<shared_job>();
    job->n = n;
    job->fn = &fn;
    for (unsigned h = 0; h < std::min<unsigned>(helpers, size()); ++h)
      post([job] {
        {
          std::lock_guard<std::mutex> lock(job->m);
          if (job->closed)
            return;
          ++job->busy;
        }
        job->drain();
        std::lock_guard<std::mutex> lock(job->m);
        if (--job->busy == 0)
          job->idle.notify_all();
      });
    job->drain();
    std::unique_lock<std::mutex> lock(job->m);
    job->closed = true;
    job->idle.wait(lock, [&] { return job->busy == 0; });
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
