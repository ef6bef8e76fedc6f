// The ordo command: `ordo node` serves, `ordo demo` shows prefix reuse end to end, `ordo bench`
// times the forward and the copy paths on the configured device.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "tools/bench.hpp"
#include "runtime/version.hpp"
#include "tools/demo.hpp"
#include "tools/certs.hpp"
#include "tools/config_tool.hpp"
#include "tools/model_tool.hpp"
#include "tools/process_signals.hpp"
#include "tools/proxy/proxy.hpp"
#include "tools/harness/topo.hpp"
#include "tools/store.hpp"
#include "tools/trace/trace_tools.hpp"


namespace {

int run_node(const std::string& config_path, const std::vector<std::string>& sets, std::optional<int> port_override) {
  auto signals = ordo::block_process_signals(); // before any thread starts
  ordo::node_config cfg;
  try {
    auto overrides = sets;
    if (port_override)
      overrides.push_back("server.port=" + std::to_string(*port_override));
    cfg = ordo::load_config_file(config_path, overrides);
  } catch (const std::exception& e) {
    std::cerr << "ordo node: invalid config: " << e.what() << "\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  ordo::node n(cfg);
  int port = 0;
  try {
    port = n.start();
  } catch (const std::exception& e) {
    std::cerr << "ordo node: cannot start: " << e.what() << "\n";
    return 1;
  }
  std::cout << "listening on http://" << cfg.host << ":" << port;
  if (n.actor_port() > 0) // P/D: where peers reach this node's host tier
    std::cout << " tcp://" << cfg.host << ":" << n.actor_port();
  std::cout << std::endl;
  int sig = ordo::wait_for_stop_signal(signals, "ordo node",
                                       "no reload: the config is read at start; SIGINT or SIGTERM stops the node");
  spdlog::info("ordo node: {}: draining in-flight requests", ordo::signal_name(sig));
  n.drain_and_stop();
  spdlog::info("ordo node: stopped");
  return 0;
}

// --config, --set and --port of a serving command (node, store, proxy).
struct serve_options {
  std::string config;
  std::vector<std::string> sets;
  int port = 0;
  CLI::Option* port_opt = nullptr;

  void add_to(CLI::App* cmd, const std::string& config_help, bool config_required, const std::string& set_example,
              const std::string& port_help) {
    auto* c = cmd->add_option("--config", config, config_help);
    if (config_required)
      c->required();
    cmd->add_option("--set", sets, "override a config key: --set " + set_example + " (repeatable)");
    port_opt = cmd->add_option("--port", port, port_help);
  }
  std::optional<int> port_given() const { return port_opt->count() ? std::optional<int>(port) : std::nullopt; }
  // False (after saying why) for a --port out of range, where no config checks it.
  bool port_in_range(const char* who) const {
    if (!port_opt->count() || (port >= 0 && port <= 65535))
      return true;
    std::cerr << who << ": --port " << port << ": must be between 0 and 65535 (0 picks a free one)\n";
    return false;
  }
};

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"ordo: an LLM serving node of actors with ordered prefix reuse"};
  app.require_subcommand(1);
  // Logs go to stderr: stdout carries only what scripts read ("listening on ...", tables).
  spdlog::set_default_logger(spdlog::stderr_color_mt("ordo"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  auto* node_cmd = app.add_subcommand("node", "serve the OpenAI-shaped API from a config file");
  serve_options node_opts;
  node_opts.add_to(node_cmd, "node config (TOML)", true, "cache.block_size=16",
                   "listen port 0..65535 (0 picks a free one)");
  std::string node_trace;
  node_cmd->add_option("--trace", node_trace, "record the run to this trace file (= --set trace.path=FILE)");

  auto* topo_cmd = app.add_subcommand("topo", "scripted multi-process topologies");
  topo_cmd->require_subcommand(1);
  std::string topo_file;
  auto* topo_run_cmd = topo_cmd->add_subcommand("run", "start the processes of FILE.toml, run its steps, stop them");
  topo_run_cmd->add_option("file", topo_file, "topology (TOML)")->required();

  auto* proxy_cmd = app.add_subcommand("proxy", "OpenAI-compatible front over prefill and decode nodes (P/D)");
  serve_options proxy_opts;
  proxy_opts.add_to(proxy_cmd, "proxy config (TOML)", true, "proxy.decode=127.0.0.1:8001",
                    "HTTP port 0..65535 (0 picks a free one)");

  auto* store_cmd = app.add_subcommand("store", "serve the shared store of this host to its nodes (CAF remote actors)");
  serve_options store_opts; // no --config: the built-in defaults (configs/store.toml spells them out)
  store_opts.add_to(store_cmd, "store config (TOML); without it the defaults of configs/store.toml", false,
                    "store.capacity_mb=64", "actor port 0..65535 (0 picks a free one)");

  auto* model_cmd = app.add_subcommand("model", "Hugging Face checkpoints (docs/models.md)");
  model_cmd->require_subcommand(1);
  ordo::random_checkpoint_options random_opts;
  auto* model_random_cmd = model_cmd->add_subcommand("random", "write a random checkpoint with a config.json's dims");
  model_random_cmd->add_option("--like", random_opts.like_config, "a config.json")->required();
  model_random_cmd->add_option("--out", random_opts.out_dir, "directory to write config.json and model.safetensors to")->required();
  model_random_cmd->add_option("--layers", random_opts.num_layers, "keep the first N layers (0: all)");
  model_random_cmd->add_option("--seed", random_opts.seed, "seed of the values (same seed, same bytes)");

  auto* certs_cmd = app.add_subcommand("certs", "make the deployment's CA and certificates for security.tls "
                                                 "(docs/security.md)");
  ordo::certs_options certs;
  certs_cmd->add_option("--dir", certs.dir, "directory of ca.crt, ca.key and NAME.crt, NAME.key (made 0700)")
      ->required();
  certs_cmd->add_option("--role", certs.role, "admin | node: an admin certificate may evict_all at a store");
  certs_cmd->add_option("--days", certs.days, "validity in days (1..3650)");
  certs_cmd->add_option("names", certs.names, "one certificate per name (a process, a host)");

  auto* config_cmd = app.add_subcommand("config", "the config files' keys (docs/config.md)");
  config_cmd->require_subcommand(1);
  auto* config_keys_cmd =
      config_cmd->add_subcommand("keys", "every key of the node, store and proxy configs as markdown tables");

  auto* demo_cmd = app.add_subcommand("demo", "run a multi-turn workload twice with an HBM eviction between");
  std::string demo_config = "configs/default.toml";
  std::vector<std::string> demo_sets;
  demo_cmd->add_option("--config", demo_config, "node config (TOML)");
  demo_cmd->add_option("--set", demo_sets, "override a config key (repeatable)");
  std::string demo_trace;
  demo_cmd->add_option("--trace", demo_trace, "record the run to this trace file (= --set trace.path=FILE)");

  auto* trace_cmd = app.add_subcommand("trace", "read a recorded trace: show, timeline, check");
  trace_cmd->require_subcommand(1);
  ordo::trace_show_options show;
  auto* show_cmd = trace_cmd->add_subcommand("show", "one readable line per record");
  show_cmd->add_option("FILE", show.path, "trace file")->required();
  show_cmd->add_option("--actor", show.actor, "only this actor's records");
  show_cmd->add_option("--step", show.step, "only the records of the step with this seq");
  std::vector<std::string> timeline_files;
  std::string timeline_out;
  auto* timeline_cmd = trace_cmd->add_subcommand("timeline", "Chrome trace JSON for Perfetto (several files merge)");
  timeline_cmd->add_option("FILE", timeline_files, "trace files, one per node")->required();
  timeline_cmd->add_option("-o,--output", timeline_out, "the JSON file to write")->required();
  std::string check_file;
  auto* check_cmd = trace_cmd->add_subcommand("check", "verify the step protocol's ordering rules on the recorded graph");
  check_cmd->add_option("FILE", check_file, "trace file")->required();

  ordo::replay_options replay;
  auto* replay_cmd = app.add_subcommand("replay", "re-run a recorded actor core or node and compare");
  replay_cmd->add_option("FILE", replay.path, "trace file")->required();
  replay_cmd->add_option("--actor", replay.actor, "scheduler | block_pool | connector | store");
  replay_cmd->add_flag("--node", replay.node, "re-send the recorded requests to a fresh node, compare digests");
  replay_cmd->add_option("--set", replay.sets, "override a config key of the recorded config (repeatable)");

  auto* bench_cmd = app.add_subcommand("bench", "time the forward, the matmuls, the copy paths or the offload path (table + BENCH_JSON line)");
  bench_cmd->require_subcommand(1);
  ordo::bench_forward_options fwd;
  auto* fwd_cmd = bench_cmd->add_subcommand("forward", "prefill and decode throughput through the step executor");
  fwd_cmd->add_option("--config", fwd.config_path, "node config (TOML)")->required();
  fwd_cmd->add_option("--set", fwd.overrides, "override a config key (repeatable)");
  fwd_cmd->add_option("--prompt-tokens", fwd.prompt_tokens, "prompt tokens per request");
  fwd_cmd->add_option("--decode-steps", fwd.decode_steps, "decode steps (one token per request each)");
  fwd_cmd->add_option("--batch", fwd.batches, "concurrent requests; several values (--batch 1 8) run one after another");
  fwd_cmd->add_option("--save-chunks", fwd.save_chunks,
                      "also decode with this many KV chunk saves per step (prompt chunks to host memory), beside "
                      "the decode alone");
  ordo::bench_matmul_options mm;
  auto* matmul_cmd = bench_cmd->add_subcommand("matmul", "each projection shape of the model in every matmul mode");
  matmul_cmd->add_option("--config", mm.config_path, "node config (TOML)")->required();
  matmul_cmd->add_option("--set", mm.overrides, "override a config key (repeatable)");
  matmul_cmd->add_option("--rows", mm.rows, "x rows per call; several values run one after another");
  matmul_cmd->add_option("--repeats", mm.repeats, "launches per timing (the time is their mean, best of 3)");
  ordo::bench_copy_options cpy;
  auto* copy_cmd = bench_cmd->add_subcommand("copy", "pinned host<->device peak vs. page-unit copies");
  copy_cmd->add_option("--config", cpy.config_path, "node config (TOML)")->required();
  copy_cmd->add_option("--set", cpy.overrides, "override a config key (repeatable)");
  copy_cmd->add_option("--peak-mib", cpy.peak_mib, "size of the one large copy in MiB");
  copy_cmd->add_option("--units", cpy.units, "page units copied each way (0 = cache.num_blocks)");
  copy_cmd->add_option("--repeats", cpy.repeats, "best of this many runs");
  ordo::bench_offload_options off;
  auto* offload_cmd = bench_cmd->add_subcommand("offload", "host-tier save / load of KV chunk objects vs. plain pinned copies");
  offload_cmd->add_option("--config", off.config_path, "node config (TOML)")->required();
  offload_cmd->add_option("--set", off.overrides, "override a config key (repeatable)");
  offload_cmd->add_option("--chunks", off.chunks, "chunk objects saved and loaded each way");
  offload_cmd->add_option("--repeats", off.repeats, "best of this many runs");
  bool no_store_server = false;
  offload_cmd->add_flag("--no-store-server", no_store_server,
                        "skip the path through an `ordo store` process (started for the run by default)");

  ordo::bench_pd_options pdb;
  auto* pd_bench_cmd = bench_cmd->add_subcommand("pd", "TTFT of a P/D request vs. a single node and the transfer floor");
  pd_bench_cmd->add_option("--config", pdb.config_path, "node config (TOML) of every node started");
  pd_bench_cmd->add_option("--set", pdb.overrides, "override a config key of every node (repeatable)");
  pd_bench_cmd->add_option("--prompt-tokens", pdb.prompt_tokens, "prompt lengths (several values run one after another)");
  pd_bench_cmd->add_option("--repeats", pdb.repeats, "requests per prompt length and path (median)");

  ordo::bench_trace_options trc;
  auto* trace_bench_cmd = bench_cmd->add_subcommand("trace", "what recording a trace costs: off/on A/B, interleaved");
  trace_bench_cmd->add_option("--config", trc.config_path, "node config (TOML)")->required();
  trace_bench_cmd->add_option("--set", trc.overrides, "override a config key (repeatable)");
  trace_bench_cmd->add_option("--rounds", trc.rounds, "A/B pairs");
  trace_bench_cmd->add_option("--requests", trc.requests, "requests per run");
  trace_bench_cmd->add_option("--concurrency", trc.concurrency, "requests in flight at once");
  trace_bench_cmd->add_option("--prompt-tokens", trc.prompt_tokens, "prompt tokens per request");
  trace_bench_cmd->add_option("--max-tokens", trc.max_tokens, "tokens generated per request");
  trace_bench_cmd->add_option("--trace-dir", trc.trace_dir, "where the recorded runs write (then delete) their trace");

  app.set_version_flag("--version", std::string("ordo ") + ordo::ordo_version(),
                       "print the version and the commit it was built from");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e); // prints help, the version, or the usage error
    return code == 0 ? 0 : 2;     // a usage error exits 2, like an invalid config
  }
  if (*fwd_cmd)
    return ordo::run_bench_forward(fwd);
  if (*matmul_cmd)
    return ordo::run_bench_matmul(mm);
  if (*copy_cmd)
    return ordo::run_bench_copy(cpy);
  if (*offload_cmd) {
    off.store_server = !no_store_server;
    return ordo::run_bench_offload(off);
  }
  if (*trace_bench_cmd)
    return ordo::run_bench_trace(trc);
  if (*pd_bench_cmd)
    return ordo::run_bench_pd(pdb);
  if (*node_cmd) {
    if (!node_opts.port_in_range("ordo node"))
      return 2;
    if (!node_trace.empty())
      node_opts.sets.push_back("trace.path=" + node_trace);
    return run_node(node_opts.config, node_opts.sets, node_opts.port_given());
  }
  if (*topo_run_cmd)
    return ordo::run_topo(topo_file);
  if (*proxy_cmd) // proxy.port's own check covers --port
    return ordo::run_proxy(proxy_opts.config, proxy_opts.sets, proxy_opts.port_given());
  if (*store_cmd) {
    if (!store_opts.port_in_range("ordo store"))
      return 2;
    return ordo::run_store(store_opts.config, store_opts.sets, store_opts.port_given());
  }
  if (*model_random_cmd)
    return ordo::run_model_random(random_opts);
  if (*certs_cmd)
    return ordo::run_certs(certs);
  if (*config_keys_cmd)
    return ordo::run_config_keys();
  if (*demo_cmd) {
    if (!demo_trace.empty())
      demo_sets.push_back("trace.path=" + demo_trace);
    return ordo::run_demo(demo_config, demo_sets);
  }
  if (*show_cmd)
    return ordo::run_trace_show(show);
  if (*timeline_cmd)
    return ordo::run_trace_timeline(timeline_files, timeline_out);
  if (*check_cmd)
    return ordo::run_trace_check(check_file);
  if (*replay_cmd) {
    if (replay.node == !replay.actor.empty()) {
      std::cerr << "ordo replay: give exactly one of --actor A or --node\n";
      return 2;
    }
    return ordo::run_replay(replay);
  }
  return 2;
}
