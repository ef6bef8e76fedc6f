#include "actors/store_server.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <variant>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/host_store.hpp"
#include "runtime/metrics.hpp"

#ifndef ORDO_WIRE_DIGEST
#error "ORDO_WIRE_DIGEST must be defined by CMakeLists.txt (the digest of messages/ordo.capnp)"
#endif

namespace ordo {

uint64_t store_wire_digest() {
  return ORDO_WIRE_DIGEST;
}

std::string store_welcome_proof(const secret_key& key, const std::string& store_id, const store_hello& hello) {
  return hmac_hex(key, store_welcome_message(store_id, hello));
}

std::string store_hello_mac(const secret_key& key, const store_hello& h) { return hmac_hex(key, store_hello_message(h)); }

void sign_store_hello(const tls_context& tls, store_hello& h) {
  h.certificate = tls.certificate_pem();
  h.signature = tls.sign_hex(store_hello_message(h));
}

bool store_welcome_proven(const secret_key& key, const store_welcome& welcome, const store_hello& hello) {
  return !hello.challenge.empty() && hmac_matches(key, store_welcome_message(welcome.store_id, hello), welcome.proof);
}

void configure_store_wire(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  cfg.add_message_types<caf::id_block::ordo>();
  cfg.set("middleman.app-identifiers", std::vector<std::string>{store_wire_name});
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds(1)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(15)});
}

// --- the arena --------------------------------------------------------------------------------

namespace {

[[noreturn]] void arena_fail(const std::string& step, uint64_t bytes, int err) {
  throw std::runtime_error("cannot create the store arena of " + std::to_string(bytes) + " bytes: " + step + ": " +
                           std::strerror(err));
}

} // namespace

store_arena::store_arena(uint64_t bytes) : size_(bytes) {
  if (bytes == 0)
    throw std::runtime_error("cannot create the store arena: its size is 0 bytes");
  fd_ = memfd_create("ordo-store", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0)
    arena_fail("memfd_create", bytes, errno);
  auto fail_closing = [&](const char* step) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    arena_fail(step, bytes, err);
  };
  if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
    fail_closing("ftruncate");
  if (fcntl(fd_, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
    fail_closing("fcntl(F_ADD_SEALS)");
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED)
    fail_closing("mmap");
  data_ = static_cast<uint8_t*>(p);
}

store_arena::~store_arena() {
  if (data_)
    munmap(data_, size_);
  if (fd_ >= 0)
    ::close(fd_);
}

// --- the actor: the shell of runtime/store_sessions --------------------------------------------

namespace {

struct store_server_state {
  std::unique_ptr<store_sessions> core;
  std::string boot_id;
  std::shared_ptr<store_server_shared> shared;
  // Each sender's name for the core; a name is never reused.
  std::map<caf::actor_addr, store_peer> peers;
  store_peer next_peer = 0;
  door io;
  static inline const char* name = "store_server";

  // The sender's name, made for it when it opens a session.
  store_peer peer_of(const caf::actor_addr& addr) {
    auto [it, added] = peers.emplace(addr, next_peer);
    if (added)
      ++next_peer;
    return it->second;
  }
  // The sender's name if it has one; else a name with no session (the core refuses it).
  store_peer find_peer(const caf::actor_addr& addr) const {
    auto it = peers.find(addr);
    return it == peers.end() ? no_peer : it->second;
  }
  static constexpr store_peer no_peer = ~store_peer{0};

  void publish() {
    shared->update([&](store_server_view& v) {
      static_cast<store_session_counters&>(v) = core->counters();
      v.stats = core->stats();
      v.sessions = core->num_sessions();
      v.leases_active = core->leases_active();
      v.leased_objects = core->leased_objects();
    });
  }
};

// The server as it is spawned: its public interface, plus its own lease timer (a lease's
// (namespace, transfer id, generation), lease_ms after it was taken).
using store_server_impl = store_server_actor::extend<caf::reacts_to<lease_expire_atom, uint64_t, std::string, uint64_t>>;
using self_ptr = store_server_impl::stateful_pointer<store_server_state>;

// The sender's name for the core; an actor of this process (the node that owns the store, P/D)
// gets a session without a hello when the server has a local namespace.
store_peer sender_peer(self_ptr self) {
  auto& st = self->state;
  const caf::strong_actor_ptr& sender = self->current_sender();
  if (!sender)
    return store_server_state::no_peer;
  const auto addr = caf::actor_cast<caf::actor_addr>(sender);
  const store_peer known = st.find_peer(addr);
  if (known != store_server_state::no_peer || sender->node() != self->node())
    return known;
  const store_peer peer = st.peer_of(addr);
  if (!st.core->open_local(peer, "local:" + std::to_string(sender->id()))) {
    st.peers.erase(addr);
    return store_server_state::no_peer;
  }
  self->monitor(sender);
  return peer;
}

store_server_impl::behavior_type store_server(self_ptr self, store_server_options opt) {
  auto& st = self->state;
  store_sessions_options co;
  co.wire = store_wire_name;
  co.wire_digest = store_wire_digest();
  co.arena = opt.arena;
  co.arena_bytes = opt.arena_bytes;
  co.granularity = opt.granularity;
  co.local_namespace = opt.local_namespace;
  co.corrupt_commits_kind = opt.corrupt_commits_kind;
  co.secret = opt.secret;
  co.tls = opt.tls;
  st.core = std::make_unique<store_sessions>(std::move(co));
  st.boot_id = opt.boot_id;
  st.shared = opt.shared;
  st.shared->update([&](store_server_view& v) { v.granularity = opt.granularity; });
  st.io = door(opt.door_name, std::move(opt.tap));
  st.publish();

  // A session's actor is gone (its node ended, or the connection broke): its pins are dropped and
  // its reservations aborted; its committed objects stay.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto peer = st.peers.find(dm.source);
    if (peer == st.peers.end())
      return;
    if (auto ended = st.core->end_session(peer->second))
      spdlog::info("store: session of engine {} ended ({}): released {} pins and {} reservations", ended->engine_id,
                   caf::to_string(dm.reason), ended->pins, ended->reservations);
    st.peers.erase(peer);
    st.publish();
  });

  return {
    [self](const store_hello& h) -> store_welcome {
      auto& st = self->state;
      st.io.received(self->current_sender(), h);
      const caf::strong_actor_ptr& sender = self->current_sender();
      hello_outcome out;
      if (!sender) {
        out.welcome.why = "store_hello from no actor: send it as a request";
        out.note = "hello of engine \"" + h.engine_id + "\" refused: " + out.welcome.why;
      } else {
        const auto addr = caf::actor_cast<caf::actor_addr>(sender);
        const store_peer peer = st.peer_of(addr);
        out = st.core->hello(peer, h, st.shared->engine_id());
        if (out.opened)
          self->monitor(sender);
        else if (!st.core->has_session(peer))
          st.peers.erase(addr);
      }
      out.welcome.boot_id = st.boot_id;
      out.welcome.arena_socket = st.shared->arena_socket();
      if (out.welcome.ok)
        spdlog::info("store: {}", out.note);
      else
        spdlog::warn("store: {}", out.note);
      st.publish();
      return st.io.reply(self, std::move(out.welcome));
    },
    [self](const store_contains& q) -> caf::result<store_contains_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), q);
      auto found = st.core->contains(sender_peer(self), q);
      if (!found) {
        st.publish();
        return st.io.refuse(self, "store_contains_done",
                            "store_contains from an actor with no session: send store_hello first");
      }
      return st.io.reply(self, std::move(*found));
    },
    [self](const store_step& step) -> caf::result<store_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      step_outcome out = st.core->step(sender_peer(self), step);
      for (const auto& note : out.notes)
        spdlog::warn("store: {}", note);
      st.publish();
      if (!out.refused.empty()) {
        spdlog::error("store: engine {}: {}", out.engine_id.empty() ? "(none)" : out.engine_id, out.refused);
        return st.io.refuse(self, "store_step_done", out.refused);
      }
      for (const auto& t : out.timers)
        self->delayed_send(self, std::chrono::milliseconds(t.after_ms), lease_expire_atom_v, t.namespace_id,
                           t.transfer_id, t.generation);
      if (auto& rec = st.io.tap().recorder)
        for (const auto& g : out.done.pins)
          rec->store_verdict(g.key, g.status);
      return st.io.reply(self, std::move(out.done));
    },
    [self](const store_read& r) -> caf::result<store_read_done> {
      auto& st = self->state;
      auto at = st.core->piece(st.find_peer(caf::actor_cast<caf::actor_addr>(self->current_sender())), r.key,
                               r.offset, r.bytes, false);
      if (auto* why = std::get_if<std::string>(&at))
        return caf::make_error(caf::sec::invalid_argument, *why);
      store_read_done out{r.key, r.offset, {}};
      const uint8_t* from = st.core->arena() + std::get<uint64_t>(at);
      out.data.assign(from, from + r.bytes);
      return out;
    },
    [self](store_write& w) -> caf::result<store_write_done> {
      auto& st = self->state;
      auto at = st.core->piece(st.find_peer(caf::actor_cast<caf::actor_addr>(self->current_sender())), w.key,
                               w.offset, w.data.size(), true);
      if (auto* why = std::get_if<std::string>(&at))
        return caf::make_error(caf::sec::invalid_argument, *why);
      std::memcpy(st.core->arena() + std::get<uint64_t>(at), w.data.data(), w.data.size());
      return store_write_done{w.key, w.offset, w.data.size()};
    },
    [self](lease_expire_atom, uint64_t ns, const std::string& transfer_id, uint64_t generation) {
      auto& st = self->state;
      if (auto held = st.core->lease_expired(ns, transfer_id, generation)) {
        spdlog::info("store: lease {} expired before a decode node released it: {} objects may be evicted again",
                     transfer_id, *held);
        st.publish();
      }
    },
  };
}

} // namespace

store_server_actor spawn_store_server(caf::actor_system& sys, store_server_options options) {
  return caf::actor_cast<store_server_actor>(sys.spawn(store_server, std::move(options)));
}

// --- HTTP bodies ------------------------------------------------------------------------------

std::string render_store_health(const store_server_view& v) {
  nlohmann::json j = {
      {"status", "ok"},
      {"engine_id", v.engine_id},
      {"sessions", v.sessions},
      {"objects", v.stats.num_objects},
      {"bytes_used", v.stats.bytes_used},
      {"capacity_bytes", v.stats.bytes_capacity},
      {"granularity", v.granularity},
  };
  return j.dump();
}

static void render_lease_metrics(metrics_registry& r, const store_server_view& v) {
  r.gauge("ordo_pd_leases_active", "P/D leases held for decode nodes").set(static_cast<double>(v.leases_active));
  r.gauge("ordo_pd_leased_objects", "Objects held by P/D leases").set(static_cast<double>(v.leased_objects));
  const char* help = "P/D leases taken, and how they ended";
  r.counter("ordo_pd_leases_total", help, {{"outcome", "taken"}}).inc(v.leases_total);
  r.counter("ordo_pd_leases_total", help, {{"outcome", "released"}}).inc(v.leases_released_total);
  r.counter("ordo_pd_leases_total", help, {{"outcome", "expired"}}).inc(v.leases_expired_total);
  r.counter("ordo_faults_corrupted_commits_total", "Objects corrupted after their commit (faults.corrupt_commits)")
      .inc(v.commits_corrupted_total);
  // Refusals by reason (docs/security.md): a P/D node's published tier and `ordo store` alike.
  const char* refusal_help = "Session refusals by reason: credential (a hello without a valid MAC over the "
                             "deployment secret), role (reserves or evict_all of a read-only kv_consumer session)";
  r.counter("ordo_store_refusals_total", refusal_help, {{"reason", "credential"}})
      .inc(v.hellos_refused_credential_total);
  r.counter("ordo_store_refusals_total", refusal_help, {{"reason", "role"}}).inc(v.orders_refused_role_total);
}

std::string render_store_metrics(const store_server_view& v) {
  metrics_registry r; // built per scrape from the copy: counters start at 0 and take the totals
  const store_stats& st = v.stats;
  auto count = [&](const char* name, const char* help, int64_t value, const metric_labels& labels = {}) {
    r.counter(name, help, labels).inc(static_cast<uint64_t>(value < 0 ? 0 : value));
  };
  auto gauge = [&](const char* name, const char* help, double value) { r.gauge(name, help).set(value); };
  gauge("ordo_store_objects", "Objects committed in the store", static_cast<double>(st.num_objects));
  gauge("ordo_store_bytes_used", "Store arena bytes taken by objects and reservations",
        static_cast<double>(st.bytes_used));
  gauge("ordo_store_capacity_bytes", "Store arena capacity", static_cast<double>(st.bytes_capacity));
  gauge("ordo_store_sessions", "Live node sessions of the store", static_cast<double>(v.sessions));
  count("ordo_store_commits_total", "Objects committed (visible) in the store", st.commits_total);
  count("ordo_store_evictions_total", "Objects evicted from the store (LRU)", st.evictions_total);
  count("ordo_store_pins_total", "Pins answered ok", st.pins_total);
  const char* miss_help = "Pins that found no usable object, by reason";
  count("ordo_store_misses_total", miss_help, st.misses_total, {{"reason", "missing"}});
  count("ordo_store_misses_total", miss_help, st.checksum_failures_total, {{"reason", "checksum"}});
  count("ordo_store_misses_total", miss_help, st.header_failures_total, {{"reason", "header"}});
  count("ordo_store_checksum_failures_total", "Pins that found data changed since its commit",
        st.checksum_failures_total);
  count("ordo_store_reserves_total", "Reservations answered ok", st.reserves_total);
  count("ordo_store_rejected_total", "Reservations refused (too large or no space)", st.rejected_total);
  count("ordo_store_aborts_total", "Reservations aborted", st.aborts_total);
  count("ordo_store_hellos_refused_total", "Session hellos refused (wire, digest, engine id, credential or role)",
        static_cast<int64_t>(v.hellos_refused_total));

  count("ordo_store_requests_refused_total", "Store requests refused (no session or out of order)",
        static_cast<int64_t>(v.requests_refused_total));
  count("ordo_store_sessions_ended_total", "Sessions whose node went away (pins and reservations released)",
        static_cast<int64_t>(v.sessions_ended_total));
  render_lease_metrics(r, v);
  return r.render_prometheus();
}

std::string render_pd_lease_metrics(const store_server_view& v) {
  metrics_registry r;
  render_lease_metrics(r, v);
  return r.render_prometheus();
}

} // namespace ordo
