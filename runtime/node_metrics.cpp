#include "runtime/node_metrics.hpp"

#include <vector>

namespace ordo {

namespace {

const char* const requests_help = "Completion requests answered, by outcome";

// vLLM's buckets, with finer ones below 10 ms for fast decode steps.
const std::vector<double> time_to_first_token_buckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> inter_token_latency_buckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
    0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};

} // namespace

node_metrics::node_metrics(const node_config& config)
    : requests_ok_(registry_.counter("ordo_requests_total", requests_help, {{"status", "ok"}})),
      requests_cancelled_(registry_.counter("ordo_requests_total", requests_help, {{"status", "cancelled"}})),
      requests_rejected_(registry_.counter("ordo_requests_total", requests_help, {{"status", "rejected"}})),
      finished_stop_(registry_.counter("ordo_requests_finished_total", "Finished requests by finish reason",
                                       {{"finish_reason", "stop"}})),
      finished_length_(registry_.counter("ordo_requests_finished_total", "Finished requests by finish reason",
                                         {{"finish_reason", "length"}})),
      prompt_tokens_(registry_.counter("ordo_prompt_tokens_total", "Prompt tokens of admitted requests")),
      prompt_tokens_computed_(registry_.counter("ordo_prompt_tokens_computed_total",
                                                "Prompt tokens run through the forward (not reused)")),
      generation_tokens_(registry_.counter("ordo_generation_tokens_total", "Tokens sampled")),
      cached_tokens_hbm_(registry_.counter("ordo_prefix_cache_tokens_total", "Prompt tokens whose KV was reused, by tier",
                                           {{"tier", "hbm"}})),
      cached_tokens_cpu_(registry_.counter("ordo_prefix_cache_tokens_total", "Prompt tokens whose KV was reused, by tier",
                                           {{"tier", "cpu"}})),
      cached_tokens_store_(registry_.counter("ordo_prefix_cache_tokens_total",
                                             "Prompt tokens whose KV was reused, by tier", {{"tier", "store"}})),
      hit_ratio_hbm_(registry_.gauge("ordo_prefix_cache_hit_ratio", "Reused prompt tokens / prompt tokens, by tier",
                                     {{"tier", "hbm"}})),
      hit_ratio_cpu_(registry_.gauge("ordo_prefix_cache_hit_ratio", "Reused prompt tokens / prompt tokens, by tier",
                                     {{"tier", "cpu"}})),
      hit_ratio_store_(registry_.gauge("ordo_prefix_cache_hit_ratio", "Reused prompt tokens / prompt tokens, by tier",
                                       {{"tier", "store"}})),
      preemptions_(registry_.counter("ordo_preemptions_total", "Requests preempted because blocks ran out")),
      steps_(registry_.counter("ordo_engine_steps_total", "Engine steps completed on the device")),
      waiting_(registry_.gauge("ordo_num_requests_waiting", "Requests waiting for admission")),
      running_(registry_.gauge("ordo_num_requests_running", "Requests holding blocks")),
      blocks_free_(registry_.gauge("ordo_hbm_blocks_free", "KV blocks neither held nor cached")),
      blocks_cached_(registry_.gauge("ordo_hbm_blocks_cached", "KV blocks cached in the prefix index, evictable")),
      duration_(registry_.histogram("ordo_request_duration_seconds", "Request latency from arrival to last token",
                                    exponential_buckets(0.005, 2.0, 14))),
      time_to_first_token_(registry_.histogram("ordo_time_to_first_token_seconds",
                                               "Time from a request's arrival to its first sampled token",
                                               time_to_first_token_buckets)),
      inter_token_latency_(registry_.histogram("ordo_inter_token_latency_seconds",
                                               "Time between consecutive sampled tokens of a request",
                                               inter_token_latency_buckets)),
      checkpoints_kept_(registry_.counter("ordo_checkpoints_kept_total", "State checkpoint images made READY")),
      checkpoints_evicted_(registry_.counter("ordo_checkpoints_evicted_total", "State checkpoint images evicted")),
      checkpoints_restored_(registry_.counter("ordo_checkpoints_restored_total",
                                              "State checkpoint images restored into a request's slot")),
      images_(registry_.gauge("ordo_checkpoint_images", "State checkpoint images held (COPYING or READY)")),
      kv_params_refused_(registry_.counter("ordo_pd_kv_params_refused_total",
                                           "Requests refused because their kv_transfer_params named a prefill node "
                                           "that was neither signed for them nor listed in pd.peers")) {
  registry_.gauge("ordo_hbm_blocks_capacity", "KV blocks in the device arena").set(config.num_blocks);
  blocks_free_.set(config.num_blocks); // before the first step every block is free
}

void node_metrics::observe(const scheduler_stats& s, const completion_result* finished) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto delta = [](int64_t now, int64_t before) { return static_cast<uint64_t>(now > before ? now - before : 0); };
  prompt_tokens_.inc(delta(s.prompt_tokens, last_.prompt_tokens));
  prompt_tokens_computed_.inc(delta(s.prompt_tokens_computed, last_.prompt_tokens_computed));
  generation_tokens_.inc(delta(s.generation_tokens, last_.generation_tokens));
  cached_tokens_hbm_.inc(delta(s.prompt_tokens_from_hbm, last_.prompt_tokens_from_hbm));
  preemptions_.inc(delta(s.num_preemptions, last_.num_preemptions));
  requests_cancelled_.inc(delta(s.num_cancelled, last_.num_cancelled));
  requests_rejected_.inc(delta(s.num_rejected, last_.num_rejected));
  steps_.inc(delta(s.num_steps, last_.num_steps));
  checkpoints_kept_.inc(delta(s.checkpoints_kept, last_.checkpoints_kept));
  checkpoints_evicted_.inc(delta(s.checkpoints_evicted, last_.checkpoints_evicted));
  checkpoints_restored_.inc(delta(s.checkpoints_restored, last_.checkpoints_restored));
  images_.set(s.num_images);
  // Host tier (kv_transfer.connector = "offload").
  auto count = [&](const char* name, const char* help, int64_t now, int64_t before,
                   const std::vector<std::pair<std::string, std::string>>& labels = {}) {
    registry_.counter(name, help, labels).inc(delta(now, before));
  };
  count("ordo_offload_loads_total", "Host-tier objects loaded into page units", s.loads_total, last_.loads_total);
  count("ordo_offload_load_failures_total", "Host-tier loads refused (missing or corrupt object): recomputed",
        s.load_failures_total, last_.load_failures_total);
  count("ordo_offload_load_checksum_failures_total",
        "Host-tier loads whose checksum, summed on the device by the scatter, did not match: recomputed",
        s.load_checksum_failures_total, last_.load_checksum_failures_total);
  count("ordo_offload_saves_total", "Host-tier objects saved from page units", s.saves_total, last_.saves_total);
  count("ordo_offload_save_failures_total", "Host-tier saves refused (no room)", s.save_failures_total,
        last_.save_failures_total);
  count("ordo_offload_bytes_total", "Bytes moved between page units and the host tier", s.bytes_loaded,
        last_.bytes_loaded, {{"direction", "load"}});
  count("ordo_offload_bytes_total", "Bytes moved between page units and the host tier", s.bytes_saved,
        last_.bytes_saved, {{"direction", "save"}});
  const char* pull_help = "P/D requests that named a prefill node: pulled from it, or recomputed here because it "
                          "held nothing usable (missed) or its loads were refused (failed)";
  count("ordo_pd_pulls_total", pull_help, s.pd_pulls_ok, last_.pd_pulls_ok, {{"outcome", "pulled"}});
  count("ordo_pd_pulls_total", pull_help, s.pd_pulls_missed, last_.pd_pulls_missed, {{"outcome", "missed"}});
  count("ordo_pd_pulls_total", pull_help, s.pd_pulls_failed, last_.pd_pulls_failed, {{"outcome", "failed"}});
  const auto &st = s.store, &was = last_.store;
  count("ordo_store_commits_total", "Objects committed (visible) in the host tier", st.commits_total, was.commits_total);
  count("ordo_store_evictions_total", "Objects evicted from the host tier (LRU)", st.evictions_total,
        was.evictions_total);
  const char* miss_help = "Host-tier reads that found no usable object, by reason";
  count("ordo_store_misses_total", miss_help, st.misses_total, was.misses_total, {{"reason", "missing"}});
  count("ordo_store_misses_total", miss_help, st.checksum_failures_total, was.checksum_failures_total,
        {{"reason", "checksum"}});
  count("ordo_store_misses_total", miss_help, st.header_failures_total, was.header_failures_total,
        {{"reason", "header"}});
  count("ordo_store_rejected_total", "Host-tier reservations refused (no space)", st.rejected_total,
        was.rejected_total);
  registry_.gauge("ordo_store_objects", "Objects committed in the host tier").set(static_cast<double>(st.num_objects));
  registry_.gauge("ordo_store_bytes_used", "Host-tier bytes taken by objects and reservations")
      .set(static_cast<double>(st.bytes_used));
  registry_.gauge("ordo_store_capacity_bytes", "Host-tier capacity").set(static_cast<double>(st.bytes_capacity));
  last_ = s;
  waiting_.set(s.num_waiting);
  running_.set(s.num_running);
  blocks_free_.set(s.num_free_blocks);
  blocks_cached_.set(s.num_cached_blocks);
  if (finished) {
    registry_
        .counter("ordo_resume_reasons_total", "Finished requests by what limited their resume point",
                 {{"reason", to_string(finished->reason_kind)}})
        .inc();
    requests_ok_.inc();
    (finished->finish_reason == "stop" ? finished_stop_ : finished_length_).inc();
    duration_.observe(finished->duration_ms / 1000.0);
    if (!finished->token_ids.empty())
      time_to_first_token_.observe(finished->first_token_ms / 1000.0);
    for (float gap_ms : finished->inter_token_ms)
      inter_token_latency_.observe(gap_ms / 1000.0);
    cached_tokens_cpu_.inc(static_cast<uint64_t>(finished->from_cpu));
    cached_tokens_store_.inc(static_cast<uint64_t>(finished->from_store));
  }
  double prompt = static_cast<double>(prompt_tokens_.value());
  if (prompt > 0) {
    hit_ratio_hbm_.set(static_cast<double>(cached_tokens_hbm_.value()) / prompt);
    hit_ratio_cpu_.set(static_cast<double>(cached_tokens_cpu_.value()) / prompt);
    hit_ratio_store_.set(static_cast<double>(cached_tokens_store_.value()) / prompt);
  }
}

void node_metrics::count_error(int http_status) {
  // NOTE(one_home_for_rejections): the scheduler's num_rejected counts every 429 already.
  if (http_status == 429)
    return;
  registry_.counter("ordo_requests_total", requests_help, {{"status", std::to_string(http_status)}}).inc();
}

std::string node_metrics::render() const { return registry_.render_prometheus(); }

} // namespace ordo
