#include "actors/store_server.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
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
#include "runtime/sequence_check.hpp"

#ifndef ORDO_WIRE_DIGEST
#error "ORDO_WIRE_DIGEST must be defined by CMakeLists.txt (the digest of messages/ordo.capnp)"
#endif

namespace ordo {

uint64_t store_wire_digest() {
  return ORDO_WIRE_DIGEST;
}

namespace {
std::string hello_message(const store_hello& h) {
  return "ordo-store-hello-v1\n" + h.wire + "\n" + h.engine_id + "\n" + std::to_string(h.namespace_id) + "\n" +
         h.boot_id + "\n" + h.challenge + "\n" + h.role;
}

std::string welcome_message(const std::string& store_id, const store_hello& hello) {
  return "ordo-store-welcome-v1\n" + store_id + "\n" + hello.engine_id + "\n" + std::to_string(hello.namespace_id) +
         "\n" + hello.challenge;
}
} // namespace

std::string store_welcome_proof(const secret_key& key, const std::string& store_id, const store_hello& hello) {
  return hmac_hex(key, welcome_message(store_id, hello));
}

std::string store_hello_mac(const secret_key& key, const store_hello& h) { return hmac_hex(key, hello_message(h)); }

void sign_store_hello(const tls_context& tls, store_hello& h) {
  h.certificate = tls.certificate_pem();
  h.signature = tls.sign_hex(hello_message(h));
}

bool store_welcome_proven(const secret_key& key, const store_welcome& welcome, const store_hello& hello) {
  return !hello.challenge.empty() && hmac_matches(key, welcome_message(welcome.store_id, hello), welcome.proof);
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

// --- the actor --------------------------------------------------------------------------------

namespace {

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

// One node connector's session: what it holds in the shared store, so its death releases it.
struct session {
  std::string engine_id;
  uint64_t namespace_id = 0;
  bool read_only = false; // role kv_consumer: pins and lookups only
  // security.tls on: the role of the certificate its hello was signed with. Only an admin
  // certificate may evict_all; "" = no certificates (one shared secret, roles are declared).
  std::string certificate_role;
  sequence_check steps;
  std::unordered_map<object_key, int32_t, object_key_hash> pins; // key → pins this session holds
  std::unordered_set<object_key, object_key_hash> reservations;  // reserved, not committed or aborted
  // Where the data of each object it pins or reserved lies in the arena (store_read / store_write).
  std::unordered_map<object_key, std::pair<uint64_t, uint64_t>, object_key_hash> extents;
};

// A P/D lease: the objects held for a decode node under one transfer id of one namespace.
struct lease {
  std::vector<object_key> held;
  uint64_t generation = 0; // its expiry timer names it, so a renewed lease outlives the old timer
};
using lease_id = std::pair<uint64_t, std::string>; // namespace, transfer id

struct store_server_state {
  std::unique_ptr<host_store> core;
  std::map<lease_id, lease> leases;
  uint64_t lease_generation = 0;
  uint8_t corrupt_commits_kind = 255;
  std::optional<secret_key> secret;
  std::shared_ptr<const tls_context> tls;
  uint64_t arena_bytes = 0;
  std::string granularity;
  std::string boot_id;
  std::shared_ptr<store_server_shared> shared;
  std::map<caf::actor_addr, session> sessions;
  std::optional<uint64_t> local_namespace; // actors of this process need no hello (P/D)
  door io;
  static inline const char* name = "store_server";

  void publish() {
    const store_stats st = core ? core->stats() : store_stats{};
    const auto n = static_cast<int64_t>(sessions.size());
    int64_t objects = 0;
    for (const auto& [id, l] : leases)
      objects += static_cast<int64_t>(l.held.size());
    shared->update([&](store_server_view& v) {
      v.stats = st;
      v.sessions = n;
      v.leases_active = static_cast<int64_t>(leases.size());
      v.leased_objects = objects;
    });
  }

  // Ends a lease: its objects may be evicted again. False if there is none of that id.
  bool end_lease(const lease_id& id) {
    auto it = leases.find(id);
    if (it == leases.end())
      return false;
    for (const auto& k : it->second.held)
      core->release_hold(k); // false only for an object a failed pin dropped meanwhile
    leases.erase(it);
    return true;
  }
};

// The server as it is spawned: its public interface, plus its own lease timer (a lease's
// (namespace, transfer id, generation), lease_ms after it was taken).
using store_server_impl = store_server_actor::extend<caf::reacts_to<lease_expire_atom, uint64_t, std::string, uint64_t>>;
using self_ptr = store_server_impl::stateful_pointer<store_server_state>;

// The sender's session; an actor of this process (the node that owns the store, P/D) has one
// without a hello when the server was given local_namespace.
std::map<caf::actor_addr, session>::iterator session_of(self_ptr self) {
  auto& st = self->state;
  const caf::strong_actor_ptr& sender = self->current_sender();
  const auto addr = caf::actor_cast<caf::actor_addr>(sender);
  auto it = st.sessions.find(addr);
  if (it != st.sessions.end() || !st.local_namespace || !sender || sender->node() != self->node())
    return it;
  session s;
  s.engine_id = "local:" + std::to_string(sender->id());
  s.namespace_id = *st.local_namespace;
  self->monitor(sender);
  st.publish();
  return st.sessions.emplace(addr, std::move(s)).first;
}

// A request from an actor with no session: refused (named, counted), nothing changes.
caf::error no_session(self_ptr self, const std::string& kind) {
  auto& st = self->state;
  st.shared->update([](store_server_view& v) { ++v.requests_refused_total; });
  const std::string reply = kind + "_done";
  return st.io.refuse(self, reply.c_str(), kind + " from an actor with no session: send store_hello first");
}

// The session's record of what it holds, after `step` was applied and answered by `done`.
void track(session& s, const store_step& step, const store_step_done& done) {
  for (const auto& k : step.commits)
    s.reservations.erase(k);
  for (const auto& k : step.aborts)
    s.reservations.erase(k);
  for (const auto* keys : {&step.unpins, &step.unpins_corrupt})
    for (const auto& k : *keys) {
      auto it = s.pins.find(k);
      if (it != s.pins.end() && --it->second <= 0)
        s.pins.erase(it);
    }
  for (const auto& g : done.pins)
    if (g.ok) {
      ++s.pins[g.key];
      s.extents[g.key] = {g.data_offset, g.data_bytes};
    }
  for (const auto& g : done.reserves)
    if (g.ok) {
      s.reservations.insert(g.key);
      s.extents[g.key] = {g.data_offset, g.data_bytes};
    }
  for (auto it = s.extents.begin(); it != s.extents.end();)
    it = s.pins.count(it->first) || s.reservations.count(it->first) ? std::next(it) : s.extents.erase(it);
}

// The arena range [offset, offset + bytes) of the data of `key`, if `s` holds it as asked (a pin
// to read, a reservation to write) and the range lies inside its data; else why not.
std::variant<uint64_t, std::string> piece_at(const session& s, const object_key& key, uint64_t offset,
                                              uint64_t bytes, bool write) {
  const bool held = write ? s.reservations.count(key) != 0 : s.pins.count(key) != 0;
  auto it = s.extents.find(key);
  if (!held || it == s.extents.end())
    return std::string(write ? "store_write" : "store_read") + " of object " + hex64(key.hash) +
           ", which this session has not " + (write ? "reserved" : "pinned");
  const auto [data_offset, data_bytes] = it->second;
  if (offset > data_bytes || bytes > data_bytes - offset || bytes > store_piece_max_bytes)
    return "piece [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") of object " + hex64(key.hash) +
           " lies outside its " + std::to_string(data_bytes) + " bytes (or exceeds " +
           std::to_string(store_piece_max_bytes) + " bytes)";
  return data_offset + offset;
}

// A step's releases, then its leases (P/D, docs/pd.md), in the session's namespace: a lease holds
// the committed ones of its keys until a release names its transfer id or lease_ms pass; a new
// lease of a transfer id still held replaces it. done.leased answers each lease with the objects
// it holds.
void apply_leases(self_ptr self, const session& s, const store_step& step, store_step_done& done) {
  auto& st = self->state;
  const uint64_t ns = s.namespace_id;
  for (const auto& id : step.releases)
    if (st.core && st.end_lease({ns, id})) {
      st.shared->update([](store_server_view& v) { ++v.leases_released_total; });
      spdlog::debug("store: engine {} released lease {}", s.engine_id, id);
    }
  done.leased.assign(step.leases.size(), 0);
  for (size_t i = 0; i < step.leases.size() && st.core; ++i) {
    const auto& order = step.leases[i];
    const lease_id id{ns, order.transfer_id};
    st.end_lease(id);
    if (order.lease_ms <= 0)
      continue; // pd.lease_ms = 0: nothing is held
    lease l;
    l.generation = ++st.lease_generation;
    for (const auto& k : order.keys)
      if (k.namespace_id == ns && st.core->hold(k))
        l.held.push_back(k);
    if (l.held.empty())
      continue;
    done.leased[i] = static_cast<int32_t>(l.held.size());
    self->delayed_send(self, std::chrono::milliseconds(order.lease_ms), lease_expire_atom_v, ns, order.transfer_id,
                       l.generation);
    st.leases.emplace(id, std::move(l));
    st.shared->update([](store_server_view& v) { ++v.leases_total; });
  }
}

// The answer to a hello: a session for its sender, or a refusal naming both values.
store_welcome welcome(self_ptr self, const store_hello& h) {
  auto& st = self->state;
  store_welcome w;
  w.store_id = st.shared->engine_id();
  w.arena_bytes = st.core ? st.arena_bytes : 0;
  w.granularity = st.granularity;
  w.wire_digest = store_wire_digest();
  w.boot_id = st.boot_id;
  w.arena_socket = st.shared->arena_socket();
  // Proves this store holds the deployment secret, whatever the answer (a refusal proves it too).
  if (st.secret && !h.challenge.empty() && h.challenge.size() <= 128)
    w.proof = store_welcome_proof(*st.secret, w.store_id, h);
  auto refuse = [&](std::string why) {
    spdlog::warn("store: hello of engine {} refused: {}", quoted(h.engine_id), why);
    st.shared->update([](store_server_view& v) { ++v.hellos_refused_total; });
    w.ok = false;
    w.why = std::move(why);
    return w;
  };
  const caf::strong_actor_ptr& sender = self->current_sender();
  if (!sender)
    return refuse("store_hello from no actor: send it as a request");
  if (h.wire != store_wire_name)
    return refuse("wire " + quoted(h.wire) + " differs from the store's " + quoted(store_wire_name));
  if (h.wire_digest != store_wire_digest())
    return refuse("wire digest " + hex64(h.wire_digest) + " differs from the store's " +
                  hex64(store_wire_digest()) + " (built from another messages/ordo.capnp)");
  if (h.engine_id.empty())
    return refuse("engine id is empty");
  // With the deployment secret, a hello carries the node's credential over what it declares.
  if (st.secret && !hmac_matches(*st.secret, hello_message(h), h.mac)) {
    st.shared->update([](store_server_view& v) { ++v.hellos_refused_credential_total; });
    return refuse("the hello carries no valid credential (its MAC does not verify under this store's "
                  "security.secret_file): the node is not one of this deployment's processes");
  }
  if (!h.role.empty() && h.role != "kv_both" && h.role != "kv_producer" && h.role != "kv_consumer")
    return refuse("role " + quoted(h.role) + " is none of kv_both, kv_producer, kv_consumer");
  // With certificates, the hello is also signed by the node's certificate, whose role sets what
  // the session may do beyond its declared role.
  std::string certificate_role;
  if (st.tls) {
    std::string why;
    if (h.certificate.empty() || !st.tls->verify_signed(h.certificate, hello_message(h), h.signature,
                                                        certificate_role, why)) {
      st.shared->update([](store_server_view& v) { ++v.hellos_refused_credential_total; });
      return refuse("the hello's certificate does not hold (" + (h.certificate.empty() ? "no certificate" : why) +
                    "; this store has security.tls on): give the node security.certificate and security.key "
                    "from `ordo certs` under this store's security.cafile");
    }
  }
  const auto addr = caf::actor_cast<caf::actor_addr>(sender);
  for (const auto& [a, s] : st.sessions)
    if (s.engine_id == h.engine_id && a != addr)
      return refuse("engine id " + h.engine_id + " is already connected to this store");
  auto it = st.sessions.find(addr);
  if (it != st.sessions.end()) {
    if (it->second.engine_id != h.engine_id)
      return refuse("this actor already has a session as engine id " + it->second.engine_id + ", not " +
                    h.engine_id);
    w.ok = true; // a repeated hello: the same session
    return w;
  }
  session s;
  s.engine_id = h.engine_id;
  s.namespace_id = h.namespace_id;
  s.read_only = h.role == "kv_consumer";
  s.certificate_role = certificate_role;
  st.sessions.emplace(addr, std::move(s));
  self->monitor(sender);
  spdlog::info("store: session of engine {} opened (namespace {:016x}, boot id {})", h.engine_id,
               h.namespace_id, h.boot_id);
  st.publish();
  w.ok = true;
  return w;
}

store_server_impl::behavior_type store_server(self_ptr self, store_server_options opt) {
  auto& st = self->state;
  if (opt.arena && opt.arena_bytes > 0)
    st.core = std::make_unique<host_store>(opt.arena, static_cast<size_t>(opt.arena_bytes));
  st.arena_bytes = opt.arena_bytes;
  st.granularity = opt.granularity;
  st.boot_id = opt.boot_id;
  st.local_namespace = opt.local_namespace;
  st.corrupt_commits_kind = opt.corrupt_commits_kind;
  st.secret = opt.secret;
  st.tls = opt.tls;
  st.shared = opt.shared;
  st.shared->update([&](store_server_view& v) { v.granularity = opt.granularity; });
  st.io = door(opt.door_name, std::move(opt.tap));
  st.publish();

  // A session's actor is gone (its node ended, or the connection broke): drop its pins and abort
  // its reservations in one synthetic step; its committed objects stay.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto it = st.sessions.find(dm.source);
    if (it == st.sessions.end())
      return;
    session& s = it->second;
    store_step release;
    for (const auto& [k, n] : s.pins)
      for (int32_t i = 0; i < n; ++i)
        release.unpins.push_back(k);
    release.aborts.assign(s.reservations.begin(), s.reservations.end());
    if (!release.unpins.empty() || !release.aborts.empty())
      apply(st.core.get(), release);
    spdlog::info("store: session of engine {} ended ({}): released {} pins and {} reservations", s.engine_id,
                 caf::to_string(dm.reason), release.unpins.size(), release.aborts.size());
    st.sessions.erase(it);
    st.shared->update([](store_server_view& v) { ++v.sessions_ended_total; });
    st.publish();
  });

  return {
    [self](const store_hello& h) -> store_welcome {
      auto& io = self->state.io;
      io.received(self->current_sender(), h);
      return io.reply(self, welcome(self, h));
    },
    [self](const store_contains& q) -> caf::result<store_contains_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), q);
      auto own_session = session_of(self);
      if (own_session == st.sessions.end())
        return no_session(self, "store_contains");
      // A session sees only its namespace: other namespaces' keys are answered absent.
      const uint64_t ns = own_session->second.namespace_id;
      store_contains own;
      for (const auto& k : q.keys)
        if (k.namespace_id == ns)
          own.keys.push_back(k);
      const auto mine = apply(st.core.get(), own);
      store_contains_done found;
      size_t next = 0;
      for (const auto& k : q.keys)
        found.present.push_back(k.namespace_id == ns ? mine.present[next++] : uint8_t{0});
      while (found.num_leading_committed < static_cast<int32_t>(found.present.size()) &&
             found.present[static_cast<size_t>(found.num_leading_committed)])
        ++found.num_leading_committed;
      found.granularity = st.granularity;
      return st.io.reply(self, std::move(found));
    },
    [self](const store_step& step) -> caf::result<store_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      auto it = session_of(self);
      if (it == st.sessions.end())
        return no_session(self, "store_step");
      session& s = it->second;
      if (auto why = s.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
        spdlog::error("store: engine {}: {}", s.engine_id, why);
        st.shared->update([](store_server_view& v) { ++v.requests_refused_total; });
        return st.io.refuse(self, "store_step_done", why);
      }
      if (const std::string why = store_step_problem(step); !why.empty()) {
        spdlog::error("store: engine {}: {}", s.engine_id, why);
        st.shared->update([](store_server_view& v) { ++v.requests_refused_total; });
        return st.io.refuse(self, "store_step_done", why);
      }
      // A session releases only what it holds: an unpin of a pin it does not hold or an abort of
      // a reservation it did not make would take another node's.
      store_step own = step;
      auto held_pin = [&](const object_key& k) { return s.pins.count(k) != 0; };
      auto held_res = [&](const object_key& k) { return s.reservations.count(k) != 0; };
      // Unpins and corrupt unpins together release at most the pins the session holds.
      std::unordered_map<object_key, int32_t, object_key_hash> unpinning;
      auto keep_held = [&](const std::vector<object_key>& asked, std::vector<object_key>& kept, const char* what) {
        kept.clear();
        for (const auto& k : asked) {
          if (held_pin(k) && unpinning[k] < s.pins[k]) {
            ++unpinning[k];
            kept.push_back(k);
          } else {
            spdlog::warn("store: engine {}: {} of an object it has not pinned (hash {:016x}) skipped", s.engine_id,
                         what, k.hash);
          }
        }
      };
      keep_held(step.unpins, own.unpins, "unpin");
      keep_held(step.unpins_corrupt, own.unpins_corrupt, "corrupt unpin");
      own.aborts.clear();
      for (const auto& k : step.aborts) {
        if (held_res(k))
          own.aborts.push_back(k);
        else
          spdlog::warn("store: engine {}: abort of an object it has not reserved (hash {:016x}) skipped",
                       s.engine_id, k.hash);
      }
      // Pins and reserves outside the session's namespace are refused without reaching the store.
      std::vector<size_t> foreign_pins, foreign_reserves;
      auto keep_own = [&](std::vector<object_ref>& orders, std::vector<size_t>& foreign) {
        std::vector<object_ref> kept;
        for (size_t i = 0; i < orders.size(); ++i)
          (orders[i].key.namespace_id == s.namespace_id ? kept.push_back(orders[i]) : foreign.push_back(i));
        orders.swap(kept);
      };
      keep_own(own.pins, foreign_pins);
      keep_own(own.reserves, foreign_reserves);
      // A read-only (kv_consumer) session writes and evicts nothing.
      std::vector<size_t> unwritable;
      if (s.read_only && (!own.reserves.empty() || own.evict_all)) {
        for (size_t i = 0; i < step.reserves.size(); ++i)
          if (std::find(foreign_reserves.begin(), foreign_reserves.end(), i) == foreign_reserves.end())
            unwritable.push_back(i);
        if (own.evict_all)
          spdlog::warn("store: engine {}: evict_all refused: its session is read only (role kv_consumer)", s.engine_id);
        st.shared->update([&](store_server_view& v) { v.orders_refused_role_total += unwritable.size() + own.evict_all; });
        own.reserves.clear();
        own.evict_all = false;
        foreign_reserves.insert(foreign_reserves.end(), unwritable.begin(), unwritable.end());
        std::sort(foreign_reserves.begin(), foreign_reserves.end());
      }
      // With certificates, only an admin certificate's session may evict_all.
      if (own.evict_all && st.tls && s.certificate_role != tls_role_admin) {
        spdlog::warn("store: engine {}: evict_all refused: its certificate's role is \"{}\", not admin",
                     s.engine_id, s.certificate_role);
        st.shared->update([](store_server_view& v) { ++v.orders_refused_role_total; });
        own.evict_all = false;
      }
      // A reader's report that an object's data is wrong names who committed it.
      if (st.core)
        for (const auto& k : own.unpins_corrupt) {
          const std::string* by = st.core->committer_of(k);
          spdlog::warn("store: engine {} found object {:016x} corrupt; it was committed by {}", s.engine_id, k.hash,
                       by && !by->empty() ? "engine " + *by : std::string("this process"));
        }
      auto applied = apply(st.core.get(), own, s.namespace_id);
      if (st.core)
        for (const auto& k : own.commits)
          st.core->set_committer(k, s.engine_id);
      track(s, own, applied.done);
      if (st.corrupt_commits_kind != 255 && st.core)
        for (const auto& k : own.commits)
          if (k.kind == st.corrupt_commits_kind && st.core->test_corrupt(k, 4097)) {
            spdlog::warn("store: faults.corrupt_commits: flipped a byte of object {:016x} after its commit", k.hash);
            st.shared->update([](store_server_view& v) { ++v.commits_corrupted_total; });
          }
      apply_leases(self, s, step, applied.done);
      auto refuse_foreign = [&](const std::vector<object_ref>& orders, const std::vector<size_t>& foreign,
                                std::vector<store_grant>& answers) {
        for (size_t i : foreign) {
          store_grant g;
          g.key = orders[i].key;
          g.status = orders[i].key.namespace_id != s.namespace_id
                         ? "namespace " + hex64(orders[i].key.namespace_id) + " is not this session's (" +
                               hex64(s.namespace_id) + ")"
                         : std::string("this session is read only (role kv_consumer): it reserves nothing");
          answers.insert(answers.begin() + static_cast<std::ptrdiff_t>(i), std::move(g));
        }
      };
      refuse_foreign(step.pins, foreign_pins, applied.done.pins);
      refuse_foreign(step.reserves, foreign_reserves, applied.done.reserves);
      applied.done.granularity = st.granularity;
      if (auto& rec = st.io.tap().recorder)
        for (const auto& g : applied.done.pins)
          rec->store_verdict(g.key, g.status);
      for (const auto& k : applied.commits_unreserved)
        spdlog::warn("store: engine {}: commit of an object with no reservation (hash {:016x})", s.engine_id, k.hash);
      for (const auto& k : applied.unpins_unpinned)
        spdlog::warn("store: engine {}: unpin of an object that is not pinned (hash {:016x})", s.engine_id, k.hash);
      st.publish();
      return st.io.reply(self, std::move(applied.done));
    },
    [self](const store_read& r) -> caf::result<store_read_done> {
      auto& st = self->state;
      auto it = st.sessions.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      if (it == st.sessions.end())
        return caf::make_error(caf::sec::invalid_argument, "store_read from an actor with no session");
      auto at = piece_at(it->second, r.key, r.offset, r.bytes, false);
      if (auto* why = std::get_if<std::string>(&at))
        return caf::make_error(caf::sec::invalid_argument, *why);
      store_read_done out{r.key, r.offset, {}};
      const uint8_t* from = st.core->arena() + std::get<uint64_t>(at);
      out.data.assign(from, from + r.bytes);
      return out;
    },
    [self](store_write& w) -> caf::result<store_write_done> {
      auto& st = self->state;
      auto it = st.sessions.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      if (it == st.sessions.end())
        return caf::make_error(caf::sec::invalid_argument, "store_write from an actor with no session");
      auto at = piece_at(it->second, w.key, w.offset, w.data.size(), true);
      if (auto* why = std::get_if<std::string>(&at))
        return caf::make_error(caf::sec::invalid_argument, *why);
      std::memcpy(st.core->arena() + std::get<uint64_t>(at), w.data.data(), w.data.size());
      return store_write_done{w.key, w.offset, w.data.size()};
    },
    [self](lease_expire_atom, uint64_t ns, const std::string& transfer_id, uint64_t generation) {
      auto& st = self->state;
      auto it = st.leases.find({ns, transfer_id});
      if (it == st.leases.end() || it->second.generation != generation)
        return; // released, or replaced by a newer lease of the same transfer id
      spdlog::info("store: lease {} expired before a decode node released it: {} objects may be evicted again",
                   transfer_id, it->second.held.size());
      st.end_lease(it->first);
      st.shared->update([](store_server_view& v) { ++v.leases_expired_total; });
      st.publish();
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
