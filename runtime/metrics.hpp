// Prometheus metrics without an external library: counters, gauges and fixed-bucket histograms,
// registered once at startup, updated lock-free from any thread, rendered as text exposition
// format (version 0.0.4) for GET /metrics.
// Threads: registration and rendering take the registry's mutex; updates through a handle are
// atomics only. Handles stay valid as long as the registry lives.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ordo {

// A small fixed label set of one series, e.g. {{"tier", "hbm"}}; rendered in the given order.
using metric_labels = std::vector<std::pair<std::string, std::string>>;

class metric_counter {
public:
  void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<uint64_t> value_{0};
};

class metric_gauge {
public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double d);
  void inc(double d = 1.0) { add(d); }
  void dec(double d = 1.0) { add(-d); }
  double value() const { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<double> value_{0.0};
};

class metric_histogram {
public:
  // `upper_bounds` strictly increasing and finite; +Inf is implicit.
  explicit metric_histogram(std::vector<double> upper_bounds);

  void observe(double v);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Cumulative count of observations <= upper_bounds()[i]; i == size() is +Inf (the total).
  std::vector<uint64_t> cumulative_counts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_; // per bucket, not cumulative; last is +Inf
  std::atomic<double> sum_{0.0};
};

// `count` bounds: start, start*factor, start*factor^2, ...
std::vector<double> exponential_buckets(double start, double factor, int count);

class metrics_registry {
public:
  metrics_registry();
  ~metrics_registry();
  metrics_registry(const metrics_registry&) = delete;
  metrics_registry& operator=(const metrics_registry&) = delete;

  // Registers (or finds, for the same name and labels) a series and returns its handle.
  // Throws std::invalid_argument when the name lacks the `ordo_` prefix, a counter's name lacks
  // `_total` or another type's has it, a name ends in _bucket/_count/_sum, the help text is
  // empty, a name or label is malformed or reserved (le, quantile), or the name was registered
  // with another type, help text or bucket set.
  metric_counter& counter(const std::string& name, const std::string& help,
                          const metric_labels& labels = {});
  metric_gauge& gauge(const std::string& name, const std::string& help,
                      const metric_labels& labels = {});
  metric_histogram& histogram(const std::string& name, const std::string& help,
                              const std::vector<double>& upper_bounds,
                              const metric_labels& labels = {});

  // Every family in registration order: # HELP, # TYPE, then its series in registration order.
  std::string render_prometheus() const;

private:
  struct family;
  family& family_for(const std::string& name, const std::string& help, const char* type,
                     const metric_labels& labels);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<family>> families_;
};

} // namespace ordo
