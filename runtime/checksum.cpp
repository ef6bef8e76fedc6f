#include "runtime/checksum.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/object_checksum.hpp"

namespace ordo {

namespace {

// Worker threads kept for the process's lifetime, so a checksum of a few MiB does not pay for
// starting threads. One job at a time (callers are serialized); the caller works on it too.
class hash_pool {
public:
  explicit hash_pool(unsigned workers) {
    for (unsigned i = 0; i < workers; ++i)
      threads_.emplace_back([this] { work(); });
  }

  ~hash_pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_)
      t.join();
  }

  unsigned size() const { return static_cast<unsigned>(threads_.size()) + 1; }

  // Runs fn(i) for every i < n on at most `helpers` workers plus the caller.
  void run(size_t n, unsigned helpers, const std::function<void(size_t)>& fn) {
    std::lock_guard<std::mutex> one_job(job_m_);
    {
      std::lock_guard<std::mutex> lock(m_);
      job_ = &fn;
      n_ = n;
      next_.store(0);
      allowed_ = std::min<unsigned>(helpers, static_cast<unsigned>(threads_.size()));
      busy_ = 0;
      ++generation_;
    }
    wake_.notify_all();
    drain(fn);
    std::unique_lock<std::mutex> lock(m_);
    allowed_ = 0; // late wakers take no part
    done_.wait(lock, [&] { return busy_ == 0; });
    job_ = nullptr;
  }

private:
  void drain(const std::function<void(size_t)>& fn) {
    for (size_t i; (i = next_.fetch_add(1)) < n_;)
      fn(i);
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(size_t)>* job;
      {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
        if (allowed_ == 0)
          continue;
        --allowed_;
        ++busy_;
        job = job_;
      }
      drain(*job);
      std::lock_guard<std::mutex> lock(m_);
      if (--busy_ == 0)
        done_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex job_m_, m_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
  unsigned allowed_ = 0, busy_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

hash_pool& pool() {
  static hash_pool p(std::min(8u, std::max(1u, std::thread::hardware_concurrency())) - 1);
  return p;
}

} // namespace

uint64_t object_checksum(const uint8_t* data, size_t bytes, unsigned max_threads) {
  const size_t pieces = std::max<size_t>(1, (bytes + checksum_piece_bytes - 1) / checksum_piece_bytes);
  std::vector<uint64_t> sums(pieces);
  std::function<void(size_t)> sum_piece = [&](size_t i) {
    const size_t begin = i * checksum_piece_bytes;
    sums[i] = checksum_terms(data + begin, std::min(checksum_piece_bytes, bytes - std::min(bytes, begin)),
                             begin / 8);
  };
  unsigned threads = max_threads ? max_threads : pool().size();
  threads = static_cast<unsigned>(std::min<size_t>(threads, pieces / 2)); // a thread per 2+ pieces
  if (threads <= 1) {
    for (size_t i = 0; i < pieces; ++i)
      sum_piece(i);
  } else {
    pool().run(pieces, threads - 1, sum_piece);
  }
  uint64_t sum = 0;
  for (uint64_t s : sums)
    sum += s;
  return checksum_finish(sum, bytes);
}

} // namespace ordo
