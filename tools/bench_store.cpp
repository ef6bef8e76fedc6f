// `ordo bench offload`'s store server path: an `ordo store` process started from this binary,
// one session over CAF remote actors, its arena received over the arena socket, mapped and
// registered with the device like a node's store client does (actors/store_client.cpp).
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/auth_acceptor.hpp"
#include "actors/store_server.hpp"
#include "runtime/device.hpp"
#include "runtime/engine_identity.hpp"
#include "runtime/shared_arena.hpp"
#include "tools/bench.hpp"
#include "tools/harness/child_supervisor.hpp"

namespace ordo {

namespace {

constexpr auto deadline = std::chrono::seconds(30);

class remote_store final : public bench_store_server {
public:
  remote_store(device& dev, uint64_t capacity_bytes, uint64_t namespace_id) : dev_(dev) {
    start_process((capacity_bytes >> 20) + 2);
    try {
      connect(namespace_id);
    } catch (...) {
      stop_process();
      throw;
    }
  }

  ~remote_store() override {
    if (registered_)
      dev_.unregister_host(base_);
    self_.reset();
    store_ = nullptr;
    sys_.reset();
    stop_process();
  }

  uint8_t* arena() const override { return base_; }
  std::string name() const override { return name_; }

  store_step_done step(store_step s) override {
    store_step_done out;
    std::string error = "no answer";
    (*self_)->request(store_, deadline, std::move(s))
        .receive([&](store_step_done& d) { out = std::move(d), error.clear(); },
                 [&](caf::error& e) { error = sys_->render(e); });
    if (!error.empty())
      throw std::runtime_error("store server step: " + error);
    return out;
  }

private:
  void start_process(uint64_t capacity_mb) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    const std::string cap = "store.capacity_mb=" + std::to_string(capacity_mb);
    if (!child_.start({"ordo", "store", "--set", cap, "--set", "log.level=warn", "--port", "0"}, -1, out[1], -1,
                      "ordo bench offload"))
      throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    close(out[1]);
    std::string text;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (text.find('\n') == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      pollfd p{out[0], POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0)
        break;
      char buf[256];
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0)
        break;
      text.append(buf, static_cast<size_t>(n));
    }
    close(out[0]);
    const auto at = text.find(" tcp://");
    if (at == std::string::npos) {
      stop_process();
      throw std::runtime_error("the store server printed no ready line within 20 s (got \"" + text + "\")");
    }
    std::string endpoint = text.substr(at + 7, text.find('\n') - at - 7);
    const auto colon = endpoint.rfind(':');
    host_ = endpoint.substr(0, colon);
    port_ = static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1)));
  }

  void connect(uint64_t namespace_id) {
    configure_store_wire(cfg_);
    cfg_.set("logger.file-verbosity", caf::atom("quiet"));
    cfg_.set("logger.console-verbosity", caf::atom("quiet"));
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    self_ = std::make_unique<caf::scoped_actor>(*sys_);
    // Through the store's acceptor, with this user's deployment secret (docs/security.md).
    const deployment_secret secret = load_or_create_secret("");
    auto connector = spawn_auth_connector(*sys_, secret.key, 10000);
    std::string refused = "no answer";
    (*self_)->request(connector, std::chrono::seconds(15), caf::connect_atom_v, host_, port_)
        .receive(
            [&](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
              if (ptr && sys_->assignable<store_server_actor>(ifs)) {
                store_ = caf::actor_cast<store_server_actor>(ptr);
                refused.clear();
              } else {
                refused = "the actor there is not an ordo store server";
              }
            },
            [&](caf::error& e) { refused = sys_->render(e); });
    caf::anon_send_exit(connector, caf::exit_reason::user_shutdown);
    if (!refused.empty())
      throw std::runtime_error("cannot connect to the store server at " + host_ + ":" + std::to_string(port_) + ": " +
                               refused);
    store_welcome w;
    std::string error = "no answer";
    store_hello h{store_wire_name, store_wire_digest(), "bench-" + std::to_string(getpid()), namespace_id, boot_id(),
                  random_hex(32), "kv_both", ""};
    h.mac = store_hello_mac(secret.key, h);
    (*self_)->request(store_, deadline, h)
        .receive([&](store_welcome& got) { w = std::move(got), error.clear(); },
                 [&](caf::error& e) { error = sys_->render(e); });
    if (!error.empty() || !w.ok)
      throw std::runtime_error("store server hello: " + (error.empty() ? w.why : error));
    received_arena a = receive_arena_fd(w.arena_socket, 10000);
    window_ = std::make_unique<host_window>((a.bytes + (uint64_t{4} << 20)) & ~((uint64_t{2} << 20) - 1));
    base_ = window_->base() + window_->attach(a.fd, a.bytes);
    close(a.fd);
    dev_.register_host(base_, a.bytes);
    registered_ = true;
    name_ = w.store_id + " at tcp://" + host_ + ":" + std::to_string(port_) + ", pid " + std::to_string(child_.pid());
  }

  void stop_process() { child_.stop(SIGTERM, 5); }

  device& dev_;
  child_supervisor child_;
  std::string host_;
  uint16_t port_ = 0;
  std::string name_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<caf::scoped_actor> self_;
  store_server_actor store_;
  std::unique_ptr<host_window> window_;
  uint8_t* base_ = nullptr;
  bool registered_ = false;
};

} // namespace

std::unique_ptr<bench_store_server> start_bench_store_server(device& dev, uint64_t capacity_bytes,
                                                             uint64_t namespace_id) {
  return std::make_unique<remote_store>(dev, capacity_bytes, namespace_id);
}

} // namespace ordo
