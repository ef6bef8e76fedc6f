// The node's Prometheus metrics (GET /metrics): request, token, latency, cache and pool series,
// fed by the scheduler's counters after every loop turn and by the frontend's error answers.
// Every exposition passes `promtool check metrics` (tests/test_metrics.cpp runs it). Labels take
// values from fixed sets only (outcome, tier, reason class): nothing a client sends, such as a
// tenant's cache_salt, ever becomes a label.
// Thread-safe: observe() is called by the scheduler actor, count_error() by the HTTP thread and
// the frontend, render() by the HTTP thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "messages/request.hpp"
#include "runtime/config.hpp"
#include "runtime/metrics.hpp"
#include "runtime/scheduling.hpp"

namespace ordo {

class node_metrics {
public:
  explicit node_metrics(const node_config& config);

  // `finished` is the request that just finished, if any.
  void observe(const scheduler_stats& stats, const completion_result* finished);
  // An error answer of the frontend, counted under ordo_requests_total{status="<code>"}; a 429
  // is not: it is the scheduler's refusal, counted from scheduler_stats as status="rejected".
  void count_error(int http_status);
  // A request whose kv_transfer_params named a prefill node this node may not pull from
  // (ordo_pd_kv_params_refused_total; docs/security.md). Any thread.
  void count_kv_params_refused() { kv_params_refused_.inc(); }
  std::string render() const;

private:
  metrics_registry registry_;
  std::mutex mutex_;
  scheduler_stats last_; // counters already published
  metric_counter& requests_ok_;
  metric_counter& requests_cancelled_;
  metric_counter& requests_rejected_;
  metric_counter& finished_stop_;
  metric_counter& finished_length_;
  metric_counter& prompt_tokens_;
  metric_counter& prompt_tokens_computed_;
  metric_counter& generation_tokens_;
  metric_counter& cached_tokens_hbm_;
  metric_counter& cached_tokens_cpu_;
  metric_counter& cached_tokens_store_;
  metric_gauge& hit_ratio_hbm_;
  metric_gauge& hit_ratio_cpu_;
  metric_gauge& hit_ratio_store_;
  metric_counter& preemptions_;
  metric_counter& steps_;
  metric_gauge& waiting_;
  metric_gauge& running_;
  metric_gauge& blocks_free_;
  metric_gauge& blocks_cached_;
  metric_histogram& duration_;
  metric_histogram& time_to_first_token_;
  metric_histogram& inter_token_latency_;
  metric_counter& checkpoints_kept_;
  metric_counter& checkpoints_evicted_;
  metric_counter& checkpoints_restored_;
  metric_gauge& images_;
  metric_counter& kv_params_refused_;
};

using node_metrics_ptr = std::shared_ptr<node_metrics>;

inline node_metrics_ptr make_node_metrics(const node_config& config) {
  return std::make_shared<node_metrics>(config);
}

} // namespace ordo
