#include "actors/store_client.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <chrono>
#include <map>
#include <optional>
#include <unordered_map>

#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/auth_acceptor.hpp"
#include "actors/store_server.hpp"
#include "runtime/device.hpp"
#include "runtime/engine_identity.hpp"
#include "runtime/host_store.hpp"
#include "runtime/metrics.hpp"
#include "runtime/sequence_check.hpp"
#include "runtime/shared_arena.hpp"
#include "runtime/store_grants.hpp"
#include "runtime/store_sessions.hpp" // hex64

namespace ordo {

namespace {

// --- a session's own actor --------------------------------------------------------------------
// The sender the store server sees for one session: forwards each request with the deadline and
// hands the answer back. When it exits, the server releases the session's pins and reservations.

template <class Reply, class Msg>
caf::result<Reply> forward(store_server_actor::pointer self, const store_server_actor& remote, caf::timespan deadline,
                           const Msg& m) {
  auto rp = self->make_response_promise<Reply>();
  self->request(remote, deadline, m)
      .then([rp](Reply& r) mutable { rp.deliver(std::move(r)); }, [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
  return rp;
}

store_server_actor::behavior_type session_link(store_server_actor::pointer self, store_server_actor remote,
                                               caf::timespan deadline) {
  return {
      [=](const store_hello& m) -> caf::result<store_welcome> { return forward<store_welcome>(self, remote, deadline, m); },
      [=](const store_contains& m) -> caf::result<store_contains_done> {
        return forward<store_contains_done>(self, remote, deadline, m);
      },
      [=](const store_step& m) -> caf::result<store_step_done> {
        return forward<store_step_done>(self, remote, deadline, m);
      },
      [=](const store_read& m) -> caf::result<store_read_done> {
        return forward<store_read_done>(self, remote, deadline, m);
      },
      [=](const store_write& m) -> caf::result<store_write_done> {
        return forward<store_write_done>(self, remote, deadline, m);
      },
  };
}

// --- the client -------------------------------------------------------------------------------

struct session_rec {
  uint64_t gen = 0;
  store_server_actor link;   // the session's own actor (local)
  store_server_actor remote; // the store server (a proxy)
  bool live = false;         // takes requests
  bool mapped = false;
  uint64_t window_offset = 0;
  uint64_t arena_bytes = 0;
  std::string store_id;
  std::string granularity;
  store_hello hello; // what this session's hello said; the welcome's proof covers its challenge
  sequence_stamp stamp{1};
};

struct client_state {
  store_client_options opt;
  std::string where; // tcp://HOST:PORT
  std::string engine_id;
  std::string boot;
  uint64_t last_gen = 0;
  std::map<uint64_t, session_rec> sessions;
  std::optional<uint64_t> live;
  bool connecting = false;
  uint64_t retry_token = 0;
  std::chrono::milliseconds backoff{200};
  std::string down_why = "not connected yet";
  std::string granularity; // the last store's: answers without a store keep the scheduler's mode
  // Lookups that came while the first connection was being made: answered when it is (P/D: the
  // first request to a new prefill node must not miss because its session is still opening).
  struct waiting_lookup {
    store_contains query;
    caf::typed_response_promise<store_contains_done> rp;
    caf::strong_actor_ptr requester;
    std::chrono::steady_clock::time_point deadline{}; // on_demand: answered (nothing found) then
  };
  std::chrono::steady_clock::time_point last_used = std::chrono::steady_clock::now();
  std::vector<waiting_lookup> waiting;
  bool first_attempt_over = false;
  store_grant_ledger grants; // outstanding pins and reservations, by session (runtime/store_grants)
  std::unique_ptr<range_allocator> staging; // store.transport = "tcp"
  sequence_check steps;
  door io;
  static inline const char* name = "store";

  caf::actor connector; // with a secret: connects through the preamble (its own thread)

  // The sessions' own actors end with the client (the actor system waits for every actor).
  ~client_state() {
    for (auto& [gen, s] : sessions)
      caf::anon_send_exit(s.link, caf::exit_reason::user_shutdown);
    if (connector)
      caf::anon_send_exit(connector, caf::exit_reason::user_shutdown);
  }

  caf::timespan deadline() const { return std::chrono::milliseconds(opt.deadline_ms); }
  // The client's own wait for a session actor: past the session's deadline, so that one fires first.
  caf::timespan outer_deadline() const { return std::chrono::milliseconds(opt.deadline_ms + 1000); }
};

using self_ptr = store_client_actor::stateful_pointer<client_state>;

void attempt(self_ptr self);
void flush_waiting(self_ptr self);

void status_down(client_state& st, const std::string& why, bool refused) {
  st.down_why = why;
  st.opt.status->update([&](store_link_view& v) {
    v.connected = false;
    v.attempted = true;
    v.refused = refused;
    v.error = why;
    if (refused)
      ++v.refusals_total;
  });
}

// Drops an ended session's mapping and actor once no granted transfer can touch its arena.
void maybe_release(self_ptr self, uint64_t gen) {
  auto& st = self->state;
  auto it = st.sessions.find(gen);
  if (it == st.sessions.end() || it->second.live || st.grants.outstanding(gen) > 0)
    return;
  session_rec& s = it->second;
  if (s.mapped) {
    uint8_t* at = st.opt.window->base() + s.window_offset;
    try {
      st.opt.dev->unregister_host(at);
    } catch (const std::exception& e) {
      spdlog::error("store client: unregistering the arena of store session {}: {}", gen, e.what());
    }
    st.opt.window->detach(s.window_offset);
  }
  caf::anon_send_exit(s.link, caf::exit_reason::user_shutdown); // the server releases what it holds
  self->demonitor(caf::actor_cast<caf::actor_addr>(s.remote));
  st.sessions.erase(it);
}

// Whether a connection is still worth trying: a store server always; a P/D peer (on_demand) only
// while a lookup waits for it.
bool wanted(const client_state& st) { return !st.opt.on_demand || !st.waiting.empty(); }

// A P/D peer is retried quickly (its lookups wait at most the deadline); a store server in the
// background, backing off to 5 s.
void schedule_retry(self_ptr self) {
  auto& st = self->state;
  st.connecting = false;
  if (!wanted(st))
    return;
  const uint64_t token = ++st.retry_token;
  self->delayed_send(self, st.backoff, store_retry_atom_v, token);
  st.backoff = std::min(st.backoff * 2, std::chrono::milliseconds(st.opt.on_demand ? 1000 : 5000));
}

// The live session ends: no more requests through it; its arena and actor go once its granted
// transfers finished (the server keeps their pins until then).
void end_session(self_ptr self, uint64_t gen, const std::string& why, bool refused = false) {
  auto& st = self->state;
  auto it = st.sessions.find(gen);
  if (it == st.sessions.end())
    return;
  it->second.live = false;
  if (st.live == gen) {
    st.live.reset();
    spdlog::warn("store client: session with store {} at {} ended: {}; requests recompute until it is back",
                 it->second.store_id.empty() ? "?" : it->second.store_id, st.where, why);
    st.opt.status->update([](store_link_view& v) { ++v.disconnects_total; });
  }
  status_down(st, why, refused);
  maybe_release(self, gen);
}

void attempt_failed(self_ptr self, std::optional<uint64_t> gen, const std::string& why, bool refused) {
  auto& st = self->state;
  // Waiting lookups are answered (nothing found), except a P/D peer's while it is worth another
  // try: they wait for it up to their deadline.
  struct flush_at_exit {
    self_ptr self;
    bool now;
    ~flush_at_exit() {
      if (now)
        flush_waiting(self);
    }
  } flush{self, refused || !st.opt.on_demand};
  if (refused)
    spdlog::error("store client: {}", why);
  else
    spdlog::warn("store client: {}; retrying in {} ms", why, st.backoff.count());
  if (gen)
    end_session(self, *gen, why, refused);
  else
    status_down(st, why, refused);
  schedule_retry(self);
}

// The welcome arrived: check it, map the arena, go live.
void on_welcome(self_ptr self, uint64_t gen, const store_welcome& w) {
  auto& st = self->state;
  auto it = st.sessions.find(gen);
  if (it == st.sessions.end())
    return;
  session_rec& s = it->second;
  s.store_id = w.store_id;
  s.granularity = w.granularity;
  const std::string at = "the store at " + st.where;
  if (st.opt.secret && !store_welcome_proven(*st.opt.secret, w, s.hello))
    return attempt_failed(self, gen,
                          at + " (" + (w.store_id.empty() ? std::string("no identity") : w.store_id) +
                              ") did not prove it holds this deployment's secret: its welcome's proof does not "
                              "verify, so it is not one of this deployment's processes (or its security.secret_file "
                              "holds another secret); nothing is read from it",
                          true);
  if (!w.ok)
    return attempt_failed(self, gen, at + " (" + w.store_id + ") refused this node (" + st.engine_id + "): " + w.why, true);
  if (w.wire_digest != store_wire_digest())
    return attempt_failed(self, gen,
                          at + " speaks wire digest " + hex64(w.wire_digest) + ", this node " +
                              hex64(store_wire_digest()) + " (built from another messages/ordo.capnp)",
                          true);
  if (!st.opt.expect_identity.empty() && w.store_id != st.opt.expect_identity)
    return attempt_failed(self, gen,
                          at + " is " + w.store_id + ", not the store.expect_identity = " + st.opt.expect_identity,
                          true);
  if (!st.opt.tcp && w.boot_id != st.boot)
    return attempt_failed(self, gen,
                          at + " runs on another host (boot id " + w.boot_id + ", this node's " + st.boot +
                              "): store.transport = \"shm\" needs a store on this host",
                          true);
  if (st.opt.tcp) {
    s.arena_bytes = w.arena_bytes; // bytes travel as store_read / store_write pieces
  } else try {
    received_arena a = receive_arena_fd(w.arena_socket, static_cast<int>(st.opt.deadline_ms));
    if (a.bytes != w.arena_bytes) {
      ::close(a.fd);
      return attempt_failed(self, gen,
                            at + ": its arena socket gave " + std::to_string(a.bytes) + " bytes, the welcome said " +
                                std::to_string(w.arena_bytes),
                            false);
    }
    s.window_offset = st.opt.window->attach(a.fd, a.bytes);
    ::close(a.fd); // the mapping keeps the memory
    s.arena_bytes = a.bytes;
    s.mapped = true;
    st.opt.dev->register_host(st.opt.window->base() + s.window_offset, a.bytes);
  } catch (const std::exception& e) {
    return attempt_failed(self, gen, at + ": cannot map its arena: " + e.what(), false);
  }
  s.live = true;
  st.live = gen;
  st.granularity = w.granularity;
  st.connecting = false;
  st.backoff = std::chrono::milliseconds(200);
  spdlog::info("store client: connected to store {} at {} as {} (arena {} MiB, granularity {}, session {})", w.store_id,
               st.where, st.engine_id, s.arena_bytes >> 20, w.granularity, gen);
  flush_waiting(self);
  st.opt.status->update([&](store_link_view& v) {
    v.connected = true;
    v.attempted = true;
    v.refused = false;
    v.error.clear();
    v.store_id = w.store_id;
    v.granularity = w.granularity;
    v.arena_bytes = s.arena_bytes;
    ++v.connects_total;
  });
}

void attempt(self_ptr self) {
  auto& st = self->state;
  if (st.live || st.connecting || st.engine_id.empty())
    return;
  st.connecting = true;
  // With the deployment secret the connection passes ordo's preamble before BASP speaks
  // (actors/auth_acceptor.hpp): a peer that does not prove the secret, or answers junk, is refused
  // there. Without one (tests of the store core), CAF's middleman connects as it is.
  auto via = caf::actor_cast<caf::actor>(self->system().middleman().actor_handle());
  if (st.opt.secret) {
    if (!st.connector)
      st.connector = spawn_auth_connector(self->system(), *st.opt.secret, st.opt.deadline_ms, st.opt.tls);
    via = st.connector;
  }
  self->request(via, st.outer_deadline(), caf::connect_atom_v, st.opt.host, st.opt.port)
      .then(
          [self](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
            auto& st = self->state;
            if (!ptr)
              return attempt_failed(self, std::nullopt, "no actor is published at " + st.where, false);
            if (!self->system().assignable<store_server_actor>(ifs))
              return attempt_failed(self, std::nullopt,
                                    "the actor at " + st.where + " is not an ordo store server (it offers " +
                                        caf::deep_to_string(ifs) + ")",
                                    true);
            auto remote = caf::actor_cast<store_server_actor>(std::move(ptr));
            self->monitor(remote);
            const uint64_t gen = ++st.last_gen;
            session_rec s;
            s.gen = gen;
            s.remote = remote;
            s.link = self->spawn(session_link, remote, st.deadline());
            s.stamp = sequence_stamp(gen);
            st.sessions.emplace(gen, s);
            if (auto& names = st.io.tap().names)
              names->add(s.link.id(), "store_session");
            store_hello h;
            h.wire = store_wire_name;
            h.wire_digest = store_wire_digest();
            h.engine_id = st.engine_id;
            h.namespace_id = st.opt.namespace_id;
            h.boot_id = st.boot;
            h.role = st.opt.role;
            if (st.opt.secret) {
              h.challenge = random_hex(32);
              h.mac = store_hello_mac(*st.opt.secret, h);
            }
            if (st.opt.tls)
              sign_store_hello(*st.opt.tls, h);
            st.sessions.at(gen).hello = h;
            self->request(s.link, st.outer_deadline(), h)
                .then([self, gen](store_welcome& w) { on_welcome(self, gen, w); },
                      [self, gen](caf::error& e) {
                        attempt_failed(self, gen,
                                       "no welcome from the store at " + self->state.where + ": " +
                                           self->system().render(e),
                                       false);
                      });
          },
          [self](caf::error& e) {
            const bool refused = e == caf::sec::invalid_argument; // the preamble: no proof of the secret
            attempt_failed(self, std::nullopt,
                           (refused ? "refused the store at " : "cannot connect to the store at ") + self->state.where +
                               ": " + self->system().render(e),
                           refused);
          });
}

// The answer to a step no store takes: every pin and reserve refused, naming why.
store_step_done unreachable(const client_state& st, const store_step& step, const std::string& why) {
  store_step_done done;
  done.header = step.header;
  done.granularity = st.granularity;
  auto refuse = [&](const std::vector<object_ref>& orders, std::vector<store_grant>& into) {
    for (const auto& o : orders) {
      store_grant g;
      g.key = o.key;
      g.status = why;
      into.push_back(std::move(g));
    }
  };
  refuse(step.pins, done.pins);
  refuse(step.reserves, done.reserves);
  done.leased.assign(step.leases.size(), 0);
  return done;
}

store_contains_done absent(const client_state& st, const store_contains& q) {
  store_contains_done out;
  out.present.assign(q.keys.size(), 0);
  out.granularity = st.granularity;
  return out;
}

// A pin or reservation finished outside a step (its bytes never arrived): its staging range is
// given back, and the session that granted it may let go of its arena.
void drop_grant(self_ptr self, const object_key& key, bool reservation) {
  auto& st = self->state;
  const auto f = st.grants.finish(key, reservation);
  if (f.staged)
    st.staging->give(*f.staged);
  if (f.gen && st.live != f.gen)
    maybe_release(self, *f.gen);
}

// Moves every object's bytes between the staging arena and the store in pieces of at most
// store_piece_max_bytes, all in flight at once; `done` gets "" or the first failure.
void move_pieces(self_ptr self, uint64_t gen, const std::vector<staged_object>& objects, bool write,
                 std::function<void(std::string)> done) {
  auto& st = self->state;
  auto left = std::make_shared<size_t>(0);
  for (const auto& o : objects)
    *left += (o.bytes + store_piece_max_bytes - 1) / store_piece_max_bytes;
  if (*left == 0)
    return done("");
  auto failure = std::make_shared<std::string>();
  auto one_done = [left, failure, done](std::string why) {
    if (!why.empty() && failure->empty())
      *failure = std::move(why);
    if (--*left == 0)
      done(*failure);
  };
  const store_server_actor link = st.sessions.at(gen).link;
  uint8_t* base = st.opt.staging_base;
  for (const auto& o : objects)
    for (uint64_t off = 0; off < o.bytes; off += store_piece_max_bytes) {
      const uint64_t n = std::min(store_piece_max_bytes, o.bytes - off);
      uint8_t* at = base + o.staged + off;
      auto failed = [self, one_done, write](caf::error& e) {
        one_done(std::string(write ? "store_write" : "store_read") + " failed: " + self->system().render(e));
      };
      if (write)
        self->request(link, st.outer_deadline(), store_write{o.key, off, std::vector<uint8_t>(at, at + n)})
            .then([one_done, n](store_write_done& d) { one_done(d.bytes == n ? "" : "the store wrote a short piece"); },
                  failed);
      else
        self->request(link, st.outer_deadline(), store_read{o.key, off, n})
            .then(
                [one_done, n, at](store_read_done& d) {
                  if (d.data.size() != n)
                    return one_done("the store read a short piece");
                  std::memcpy(at, d.data.data(), n);
                  one_done("");
                },
                failed);
    }
}

// The live session's step failed (or its answer is unusable): end it, answer without a store.
void step_failed(self_ptr self, uint64_t gen, const std::string& why) {
  auto& st = self->state;
  st.opt.status->update([](store_link_view& v) { ++v.failed_requests_total; });
  if (st.live == gen) {
    end_session(self, gen, why);
    schedule_retry(self);
  }
}

// Sends `fwd` through session `gen` and answers the connector's `step` from the store's reply.
void forward_step(self_ptr self, uint64_t gen, const store_step& step, store_step fwd, std::vector<bool> pin_local,
                  std::vector<bool> reserve_local, caf::typed_response_promise<store_step_done> rp,
                  caf::strong_actor_ptr requester) {
  auto& st = self->state;
  const std::string held_elsewhere = "held by an ended store session until its transfer finishes";
  self->request(st.sessions.at(gen).link, st.outer_deadline(), fwd)
      .then(
          [self, rp, requester, gen, step, fwd, pin_local, reserve_local, held_elsewhere](store_step_done& got) mutable {
            auto& st = self->state;
            auto sit = st.sessions.find(gen);
            std::string bad;
            if (sit == st.sessions.end() || !sit->second.live)
              bad = "the store session ended while the step was in flight";
            else if (got.pins.size() != fwd.pins.size() || got.reserves.size() != fwd.reserves.size())
              bad = "the store answered " + std::to_string(got.pins.size()) + " pins and " +
                    std::to_string(got.reserves.size()) + " reserves for " + std::to_string(fwd.pins.size()) +
                    " and " + std::to_string(fwd.reserves.size());
            else
              for (const auto* grants : {&got.pins, &got.reserves})
                for (const auto& g : *grants)
                  if (g.ok && (g.data_offset > sit->second.arena_bytes ||
                               g.data_bytes > sit->second.arena_bytes - g.data_offset))
                    bad = "the store granted bytes outside its arena";
            if (!bad.empty()) {
              step_failed(self, gen, bad);
              return st.io.deliver(rp, requester, unreachable(st, step, "store unreachable: " + bad));
            }
            session_rec& s = sit->second;
            store_step_done done;
            done.header = step.header;
            done.stats = got.stats;
            done.num_evicted = got.num_evicted;
            done.granularity = got.granularity;
            done.leased = got.leased;
            // tcp: each granted object gets a staging range; one that does not fit is refused and
            // released in the session's next step.
            std::vector<staged_object> to_read;
            auto stage = [&](store_grant& g, bool reservation) {
              if (!g.ok || !st.staging)
                return;
              auto at = st.staging->take(g.data_bytes);
              if (!at) {
                st.grants.defer_release(gen, g.key, reservation);
                g.ok = false;
                g.status = "no room in the node's staging arena (store.transport = \"tcp\")";
                return;
              }
              if (!reservation)
                to_read.push_back({g.key, *at, g.data_bytes});
              g.data_offset = *at;
            };
            for (auto& g : got.pins)
              stage(g, false);
            for (auto& g : got.reserves)
              stage(g, true);
            auto take = [&](const std::vector<object_ref>& orders, const std::vector<bool>& local,
                            std::vector<store_grant>& answers, bool reservation, std::vector<store_grant>& into) {
              size_t next = 0;
              for (size_t i = 0; i < orders.size(); ++i) {
                if (local[i]) {
                  store_grant g;
                  g.key = orders[i].key;
                  g.status = held_elsewhere;
                  into.push_back(std::move(g));
                  continue;
                }
                store_grant g = std::move(answers[next++]);
                if (g.ok) {
                  st.grants.granted(gen, g.key, g.data_bytes, reservation,
                                    st.staging ? std::optional<uint64_t>(g.data_offset) : std::nullopt);
                  g.data_offset += st.staging ? st.opt.staging_offset : s.window_offset;
                }
                into.push_back(std::move(g));
              }
            };
            take(step.pins, pin_local, got.pins, false, done.pins);
            take(step.reserves, reserve_local, got.reserves, true, done.reserves);
            if (auto& rec = st.io.tap().recorder)
              for (const auto& g : done.pins)
                rec->store_verdict(g.key, g.status);
            if (to_read.empty())
              return st.io.deliver(rp, requester, std::move(done));
            // tcp: the pinned bytes arrive in the staging arena before the grants go out.
            move_pieces(self, gen, to_read, false, [self, rp, requester, gen, step, done](std::string why) mutable {
              auto& st = self->state;
              if (why.empty())
                return st.io.deliver(rp, requester, std::move(done));
              for (const auto& g : done.pins)
                if (g.ok)
                  drop_grant(self, g.key, false);
              for (const auto& g : done.reserves)
                if (g.ok)
                  drop_grant(self, g.key, true);
              step_failed(self, gen, why);
              st.io.deliver(rp, requester, unreachable(st, step, "store unreachable: " + why));
            });
          },
          [self, rp, requester, gen, step](caf::error& e) mutable {
            auto& st = self->state;
            const std::string why = "a store step failed: " + self->system().render(e);
            step_failed(self, gen, why);
            st.io.deliver(rp, requester, unreachable(st, step, "store unreachable: " + why));
          });
}

// A lookup through the live session, or nothing found without one.
void answer_lookup(self_ptr self, const store_contains& q, caf::typed_response_promise<store_contains_done> rp,
                   caf::strong_actor_ptr requester) {
  auto& st = self->state;
  if (!st.live) {
    st.opt.status->update([](store_link_view& v) { ++v.unreachable_answers_total; });
    return st.io.deliver(rp, requester, absent(st, q));
  }
  const uint64_t gen = *st.live;
  self->request(st.sessions.at(gen).link, st.outer_deadline(), q)
      .then(
          [self, rp, requester](store_contains_done& found) mutable {
            self->state.io.deliver(rp, requester, std::move(found));
          },
          [self, rp, requester, gen, q](caf::error& e) mutable {
            auto& st = self->state;
            st.opt.status->update([](store_link_view& v) { ++v.failed_requests_total; });
            if (st.live == gen) {
              end_session(self, gen, "a lookup failed: " + self->system().render(e));
              schedule_retry(self);
            }
            st.io.deliver(rp, requester, absent(st, q));
          });
}

void flush_waiting(self_ptr self) {
  self->state.first_attempt_over = true;
  auto waiting = std::move(self->state.waiting);
  self->state.waiting.clear();
  for (auto& w : waiting)
    answer_lookup(self, w.query, w.rp, w.requester);
}

// on_demand: lookups whose deadline passed while no session came are answered (nothing found:
// the request recomputes); the others keep waiting.
void expire_waiting(self_ptr self) {
  auto& st = self->state;
  const auto now = std::chrono::steady_clock::now();
  std::vector<client_state::waiting_lookup> still;
  for (auto& w : st.waiting) {
    if (w.deadline > now) {
      still.push_back(std::move(w));
      continue;
    }
    spdlog::warn("store client: no session with {} within the lookup's deadline ({} ms): {}; the request recomputes",
                 st.where, st.opt.deadline_ms, st.down_why);
    st.opt.status->update([](store_link_view& v) { ++v.unreachable_answers_total; });
    st.io.deliver(w.rp, w.requester, absent(st, w.query));
  }
  st.waiting = std::move(still);
}

// on_demand with idle_exit_ms: nothing asked for that long and no granted transfer outstanding,
// so the client ends (its sessions first: the arenas are unmapped, the server drops the session).
void check_idle(self_ptr self) {
  auto& st = self->state;
  const auto idle = std::chrono::milliseconds(st.opt.idle_exit_ms);
  const auto quiet = std::chrono::steady_clock::now() - st.last_used;
  const bool busy = !st.waiting.empty() || st.connecting || !st.grants.empty();
  if (busy || quiet < idle) {
    const auto next = busy ? idle : std::chrono::duration_cast<std::chrono::milliseconds>(idle - quiet);
    self->delayed_send(self, std::max(next, std::chrono::milliseconds(10)), store_tick_atom_v, uint64_t{1});
    return;
  }
  spdlog::info("store client: {} unused for {} s; closing its session", st.where, st.opt.idle_exit_ms / 1000);
  std::vector<uint64_t> gens;
  for (const auto& [gen, s] : st.sessions)
    gens.push_back(gen);
  ++st.retry_token; // no retry fires after this
  for (uint64_t gen : gens)
    if (auto it = st.sessions.find(gen); it != st.sessions.end()) {
      it->second.live = false;
      maybe_release(self, gen);
    }
  st.live.reset();
  self->quit(caf::exit_reason::normal);
}

store_client_actor::behavior_type store_client(self_ptr self, store_client_options opt) {
  auto& st = self->state;
  st.opt = std::move(opt);
  st.where = "tcp://" + st.opt.host + ":" + std::to_string(st.opt.port);
  st.boot = boot_id();
  if (st.opt.tcp)
    st.staging = std::make_unique<range_allocator>(st.opt.staging_bytes, 4096);
  st.io = door(interned_name(st.opt.trace_name), st.opt.tap);
  st.opt.status->update([&](store_link_view& v) {
    v.address = st.opt.host + ":" + std::to_string(st.opt.port);
    v.error = st.down_why;
  });

  if (st.opt.on_demand && st.opt.idle_exit_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds(st.opt.idle_exit_ms), store_tick_atom_v, uint64_t{1});

  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& [gen, s] : st.sessions)
      if (s.live && caf::actor_cast<caf::actor_addr>(s.remote) == dm.source) {
        const uint64_t g = gen;
        end_session(self, g, "the store at " + st.where + " went away (" + caf::to_string(dm.reason) + ")");
        schedule_retry(self);
        return;
      }
  });

  return {
      [self](store_connect_atom, const std::string& engine_id) {
        self->state.engine_id = engine_id;
        attempt(self);
      },
      [self](store_retry_atom, uint64_t token) {
        auto& st = self->state;
        if (token != st.retry_token)
          return;
        if (!wanted(st)) { // its lookups expired since the retry was scheduled
          st.connecting = false;
          return;
        }
        attempt(self);
      },
      [self](store_tick_atom, uint64_t what) {
        if (what == 0)
          expire_waiting(self);
        else
          check_idle(self);
      },
      [self](const store_contains& q) -> caf::result<store_contains_done> {
        auto& st = self->state;
        st.io.received(self->current_sender(), q);
        st.last_used = std::chrono::steady_clock::now();
        auto requester = self->current_sender(); // before the promise takes the request over
        auto rp = self->make_response_promise<store_contains_done>();
        if (!st.live && st.opt.on_demand) {
          // A P/D peer: wait for a session (connecting now if nobody is), up to the deadline.
          const auto wait = std::chrono::milliseconds(st.opt.deadline_ms);
          st.waiting.push_back({q, rp, requester, st.last_used + wait});
          self->delayed_send(self, wait, store_tick_atom_v, uint64_t{0});
          if (!st.connecting) {
            st.backoff = std::chrono::milliseconds(50);
            ++st.retry_token; // a retry already scheduled is replaced by this attempt
            attempt(self);
          }
        } else if (!st.live && !st.first_attempt_over) {
          st.waiting.push_back({q, rp, requester});
        } else {
          answer_lookup(self, q, rp, requester);
        }
        return rp;
      },
      [self](const store_step& step) -> caf::result<store_step_done> {
        auto& st = self->state;
        st.io.received(self->current_sender(), step);
        st.last_used = std::chrono::steady_clock::now();
        if (auto why = st.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
          spdlog::critical("store client: {}", why);
          return st.io.refuse(self, "store_step_done", why);
        }
        // Finished transfers go to the session that granted them, if it still takes orders; their
        // staging ranges (tcp) are given back, a commit's only after its bytes reached the store.
        finished_routes routes = st.grants.finish_step(step, st.live);
        for (uint64_t at : routes.give_back_now)
          st.staging->give(at);
        for (uint64_t gen : routes.ended_sessions)
          maybe_release(self, gen);
        store_step fwd = std::move(routes.forward);
        fwd.evict_all = step.evict_all;
        fwd.leases = step.leases;     // P/D: leases and releases name transfers, not this
        fwd.releases = step.releases; // session's grants: they pass through as they are
        std::vector<staged_object> writes = std::move(routes.writes);
        std::vector<uint64_t> give_back = std::move(routes.give_back_after);
        fwd.pins_summed = step.pins_summed; // this node's scatters check what it pins
        auto release_staging = [self, give_back] {
          for (uint64_t at : give_back)
            self->state.staging->give(at);
        };
        if (!st.live) {
          release_staging();
          st.opt.status->update([](store_link_view& v) { ++v.unreachable_answers_total; });
          return st.io.reply(self, unreachable(st, step, "store unreachable: " + st.down_why));
        }
        const uint64_t gen = *st.live;
        session_rec& s = st.sessions.at(gen);
        const store_step deferred = st.grants.take_deferred(gen);
        fwd.unpins.insert(fwd.unpins.end(), deferred.unpins.begin(), deferred.unpins.end());
        fwd.aborts.insert(fwd.aborts.end(), deferred.aborts.begin(), deferred.aborts.end());
        // A key still held from an ended session is refused until its transfers finish.
        std::vector<bool> pin_local(step.pins.size()), reserve_local(step.reserves.size());
        auto route = [&](const std::vector<object_ref>& orders, std::vector<bool>& local, std::vector<object_ref>& out) {
          for (size_t i = 0; i < orders.size(); ++i) {
            local[i] = st.grants.held_elsewhere(orders[i].key, gen);
            if (!local[i])
              out.push_back(orders[i]);
          }
        };
        route(step.pins, pin_local, fwd.pins);
        route(step.reserves, reserve_local, fwd.reserves);
        fwd.header = {gen, s.stamp.next()};
        auto requester = self->current_sender();
        auto rp = self->make_response_promise<store_step_done>();
        if (writes.empty()) {
          forward_step(self, gen, step, std::move(fwd), pin_local, reserve_local, rp, requester);
          return rp;
        }
        // tcp: the saved bytes go to the store before their commits.
        move_pieces(self, gen, writes, true,
                    [self, gen, step, fwd, pin_local, reserve_local, rp, requester, release_staging](std::string why) mutable {
                      release_staging();
                      auto& st = self->state;
                      if (!why.empty() || st.live != gen) {
                        if (why.empty())
                          why = "the store session ended while saved bytes were in flight";
                        step_failed(self, gen, why);
                        return st.io.deliver(rp, requester, unreachable(st, step, "store unreachable: " + why));
                      }
                      forward_step(self, gen, step, std::move(fwd), pin_local, reserve_local, rp, requester);
                    });
        return rp;
      },
      [self](const store_corrupt& c) -> caf::result<int32_t> {
        self->state.io.received(self->current_sender(), c);
        return caf::make_error(caf::sec::invalid_argument,
                               "store_corrupt is a test hook of the in-process store; a store server does not take it");
      },
  };
}

} // namespace

store_client_actor spawn_store_client(caf::actor_system& sys, store_client_options options) {
  return sys.spawn(store_client, std::move(options));
}

std::string render_store_link_metrics(const store_link_view& v) {
  metrics_registry r;
  r.gauge("ordo_store_connected", "1 while the node has a live session with its store server (kv_transfer.connector = store)")
      .set(v.connected ? 1.0 : 0.0);
  auto count = [&](const char* name, const char* help, uint64_t value) { r.counter(name, help).inc(value); };
  count("ordo_store_connects_total", "Store server sessions opened", v.connects_total);
  count("ordo_store_disconnects_total", "Store server sessions lost (store gone, deadline, error)", v.disconnects_total);
  count("ordo_store_refusals_total", "Store sessions refused (identity, wire digest, host, expected identity)",
        v.refusals_total);
  count("ordo_store_failed_requests_total", "Store requests that met a deadline, an error or a dead store",
        v.failed_requests_total);
  count("ordo_store_unreachable_answers_total",
        "Lookups and steps answered without a store (nothing found, every transfer refused)",
        v.unreachable_answers_total);
  return r.render_prometheus();
}

std::string render_store_link_health(const store_link_view& v) {
  nlohmann::json j = {{"address", v.address},
                      {"status", v.connected ? "connected" : "unreachable"},
                      {"connected", v.connected},
                      {"store_id", v.store_id},
                      {"granularity", v.granularity}};
  if (!v.connected)
    j["error"] = v.error;
  return j.dump();
}

} // namespace ordo
