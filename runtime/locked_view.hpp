// A value one actor updates and other threads (HTTP, main) read as copies, under one mutex:
// the store server's and the store client's state for /health and /metrics.
#pragma once

#include <mutex>
#include <utility>

namespace ordo {

template <class T>
class locked_view {
public:
  T view() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  template <class F>
  void update(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    std::forward<F>(f)(value_);
  }

private:
  mutable std::mutex mu_;
  T value_;
};

} // namespace ordo
