// The ordo command: `ordo node` serves, `ordo demo` shows prefix reuse end to end.
#include <csignal>
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "tools/demo.hpp"

namespace {

// Blocks SIGINT/SIGTERM in every thread started after this, so main can sigwait for them.
sigset_t block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int run_node(const std::string& config_path, const std::vector<std::string>& sets, int port_override) {
  ordo::node_config cfg;
  try {
    auto overrides = sets;
    if (port_override >= 0)
      overrides.push_back("server.port=" + std::to_string(port_override));
    cfg = ordo::load_config_file(config_path, overrides);
  } catch (const std::exception& e) {
    std::cerr << "ordo node: invalid config: " << e.what() << "\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  auto signals = block_shutdown_signals();
  ordo::node n(cfg);
  int port = 0;
  try {
    port = n.start();
  } catch (const std::exception& e) {
    std::cerr << "ordo node: cannot start: " << e.what() << "\n";
    return 1;
  }
  std::cout << "listening on http://" << cfg.host << ":" << port << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("ordo node: signal {}: draining in-flight requests", sig);
  n.drain_and_stop();
  spdlog::info("ordo node: stopped");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"ordo: an LLM serving node of actors with ordered prefix reuse"};
  app.require_subcommand(1);
  // Logs go to stderr: stdout carries only what scripts read ("listening on ...", tables).
  spdlog::set_default_logger(spdlog::stderr_color_mt("ordo"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  auto* node_cmd = app.add_subcommand("node", "serve the OpenAI-shaped API from a config file");
  std::string config_path;
  std::vector<std::string> sets;
  int port = -1;
  node_cmd->add_option("--config", config_path, "node config (TOML)")->required();
  node_cmd->add_option("--set", sets, "override a config key: --set cache.block_size=16 (repeatable)");
  node_cmd->add_option("--port", port, "listen port (0 picks a free one)");

  auto* demo_cmd = app.add_subcommand("demo", "run a multi-turn workload twice with an HBM eviction between");
  std::string demo_config = "configs/default.toml";
  std::vector<std::string> demo_sets;
  demo_cmd->add_option("--config", demo_config, "node config (TOML)");
  demo_cmd->add_option("--set", demo_sets, "override a config key (repeatable)");

  CLI11_PARSE(app, argc, argv);
  if (*node_cmd)
    return run_node(config_path, sets, port);
  if (*demo_cmd)
    return ordo::run_demo(demo_config, demo_sets);
  return 2;
}
