#include "runtime/store_sessions.hpp"

#include <algorithm>
#include <cstdio>

namespace ordo {

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

namespace {

std::string hash_hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

} // namespace

std::string store_hello_message(const store_hello& h) {
  return "ordo-store-hello-v1\n" + h.wire + "\n" + h.engine_id + "\n" + std::to_string(h.namespace_id) + "\n" +
         h.boot_id + "\n" + h.challenge + "\n" + h.role;
}

std::string store_welcome_message(const std::string& store_id, const store_hello& hello) {
  return "ordo-store-welcome-v1\n" + store_id + "\n" + hello.engine_id + "\n" + std::to_string(hello.namespace_id) +
         "\n" + hello.challenge;
}

store_sessions::store_sessions(store_sessions_options options) : opt_(std::move(options)) {
  if (opt_.arena && opt_.arena_bytes > 0)
    core_ = std::make_unique<host_store>(opt_.arena, static_cast<size_t>(opt_.arena_bytes));
}

int64_t store_sessions::leased_objects() const {
  int64_t n = 0;
  for (const auto& [id, l] : leases_)
    n += static_cast<int64_t>(l.held.size());
  return n;
}

hello_outcome store_sessions::hello(store_peer peer, const store_hello& h, const std::string& store_id) {
  hello_outcome out;
  store_welcome& w = out.welcome;
  w.store_id = store_id;
  w.arena_bytes = core_ ? opt_.arena_bytes : 0;
  w.granularity = opt_.granularity;
  w.wire_digest = opt_.wire_digest;
  // Proves this store holds the deployment secret, whatever the answer (a refusal proves it too).
  if (opt_.secret && !h.challenge.empty() && h.challenge.size() <= 128)
    w.proof = hmac_hex(*opt_.secret, store_welcome_message(store_id, h));
  auto refuse = [&](std::string why) {
    ++counters_.hellos_refused_total;
    out.note = "hello of engine " + quoted(h.engine_id) + " refused: " + why;
    w.ok = false;
    w.why = std::move(why);
    return out;
  };
  if (h.wire != opt_.wire)
    return refuse("wire " + quoted(h.wire) + " differs from the store's " + quoted(opt_.wire));
  if (h.wire_digest != opt_.wire_digest)
    return refuse("wire digest " + hex64(h.wire_digest) + " differs from the store's " + hex64(opt_.wire_digest) +
                  " (built from another messages/ordo.capnp)");
  if (h.engine_id.empty())
    return refuse("engine id is empty");
  // With the deployment secret, a hello carries the node's credential over what it declares.
  if (opt_.secret && !hmac_matches(*opt_.secret, store_hello_message(h), h.mac)) {
    ++counters_.hellos_refused_credential_total;
    return refuse("the hello carries no valid credential (its MAC does not verify under this store's "
                  "security.secret_file): the node is not one of this deployment's processes");
  }
  if (!h.role.empty() && h.role != "kv_both" && h.role != "kv_producer" && h.role != "kv_consumer")
    return refuse("role " + quoted(h.role) + " is none of kv_both, kv_producer, kv_consumer");
  // With certificates, the hello is also signed by the node's certificate, whose role sets what
  // the session may do beyond its declared role.
  std::string certificate_role;
  if (opt_.tls) {
    std::string why;
    if (h.certificate.empty() ||
        !opt_.tls->verify_signed(h.certificate, store_hello_message(h), h.signature, certificate_role, why)) {
      ++counters_.hellos_refused_credential_total;
      return refuse("the hello's certificate does not hold (" + (h.certificate.empty() ? "no certificate" : why) +
                    "; this store has security.tls on): give the node security.certificate and security.key "
                    "from `ordo certs` under this store's security.cafile");
    }
  }
  for (const auto& [p, s] : sessions_)
    if (s.engine_id == h.engine_id && p != peer)
      return refuse("engine id " + h.engine_id + " is already connected to this store");
  auto it = sessions_.find(peer);
  if (it != sessions_.end()) {
    if (it->second.engine_id != h.engine_id)
      return refuse("this actor already has a session as engine id " + it->second.engine_id + ", not " +
                    h.engine_id);
    w.ok = true; // a repeated hello: the same session
    return out;
  }
  session s;
  s.engine_id = h.engine_id;
  s.namespace_id = h.namespace_id;
  s.read_only = h.role == "kv_consumer";
  s.certificate_role = certificate_role;
  sessions_.emplace(peer, std::move(s));
  out.opened = true;
  out.note = "session of engine " + h.engine_id + " opened (namespace " + hash_hex(h.namespace_id) + ", boot id " +
             h.boot_id + ")";
  w.ok = true;
  return out;
}

bool store_sessions::open_local(store_peer peer, const std::string& name) {
  if (sessions_.count(peer))
    return true;
  if (!opt_.local_namespace)
    return false;
  session s;
  s.engine_id = name;
  s.namespace_id = *opt_.local_namespace;
  sessions_.emplace(peer, std::move(s));
  return true;
}

std::optional<store_contains_done> store_sessions::contains(store_peer peer, const store_contains& q) {
  auto it = sessions_.find(peer);
  if (it == sessions_.end()) {
    ++counters_.requests_refused_total;
    return std::nullopt;
  }
  // A session sees only its namespace: other namespaces' keys are answered absent.
  const uint64_t ns = it->second.namespace_id;
  store_contains own;
  for (const auto& k : q.keys)
    if (k.namespace_id == ns)
      own.keys.push_back(k);
  const auto mine = apply(core_.get(), own);
  store_contains_done found;
  size_t next = 0;
  for (const auto& k : q.keys)
    found.present.push_back(k.namespace_id == ns ? mine.present[next++] : uint8_t{0});
  while (found.num_leading_committed < static_cast<int32_t>(found.present.size()) &&
         found.present[static_cast<size_t>(found.num_leading_committed)])
    ++found.num_leading_committed;
  found.granularity = opt_.granularity;
  return found;
}

step_outcome store_sessions::step(store_peer peer, const store_step& step) {
  step_outcome out;
  auto it = sessions_.find(peer);
  if (it == sessions_.end()) {
    ++counters_.requests_refused_total;
    out.refused = "store_step from an actor with no session: send store_hello first";
    return out;
  }
  session& s = it->second;
  out.engine_id = s.engine_id;
  const std::string who = "engine " + s.engine_id + ": ";
  if (auto why = s.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
    ++counters_.requests_refused_total;
    out.refused = why;
    return out;
  }
  if (std::string why = store_step_problem(step); !why.empty()) {
    ++counters_.requests_refused_total;
    out.refused = why;
    return out;
  }
  // A session releases only what it holds: an unpin of a pin it does not hold or an abort of a
  // reservation it did not make would take another node's. Unpins and corrupt unpins together
  // release at most the pins it holds.
  store_step own = step;
  std::unordered_map<object_key, int32_t, object_key_hash> unpinning;
  auto keep_held = [&](const std::vector<object_key>& asked, std::vector<object_key>& kept, const char* what) {
    kept.clear();
    for (const auto& k : asked) {
      auto held = s.pins.find(k);
      if (held != s.pins.end() && unpinning[k] < held->second) {
        ++unpinning[k];
        kept.push_back(k);
      } else {
        out.notes.push_back(who + what + " of an object it has not pinned (hash " + hash_hex(k.hash) + ") skipped");
      }
    }
  };
  keep_held(step.unpins, own.unpins, "unpin");
  keep_held(step.unpins_corrupt, own.unpins_corrupt, "corrupt unpin");
  own.aborts.clear();
  for (const auto& k : step.aborts) {
    if (s.reservations.count(k))
      own.aborts.push_back(k);
    else
      out.notes.push_back(who + "abort of an object it has not reserved (hash " + hash_hex(k.hash) + ") skipped");
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
  if (s.read_only && (!own.reserves.empty() || own.evict_all)) {
    std::vector<size_t> unwritable;
    for (size_t i = 0; i < step.reserves.size(); ++i)
      if (std::find(foreign_reserves.begin(), foreign_reserves.end(), i) == foreign_reserves.end())
        unwritable.push_back(i);
    if (own.evict_all)
      out.notes.push_back(who + "evict_all refused: its session is read only (role kv_consumer)");
    counters_.orders_refused_role_total += unwritable.size() + (own.evict_all ? 1 : 0);
    own.reserves.clear();
    own.evict_all = false;
    foreign_reserves.insert(foreign_reserves.end(), unwritable.begin(), unwritable.end());
    std::sort(foreign_reserves.begin(), foreign_reserves.end());
  }
  // With certificates, only an admin certificate's session may evict_all.
  if (own.evict_all && opt_.tls && s.certificate_role != tls_role_admin) {
    out.notes.push_back(who + "evict_all refused: its certificate's role is " + quoted(s.certificate_role) +
                        ", not admin");
    ++counters_.orders_refused_role_total;
    own.evict_all = false;
  }
  // A reader's report that an object's data is wrong names who committed it.
  if (core_)
    for (const auto& k : own.unpins_corrupt) {
      const std::string* by = core_->committer_of(k);
      out.notes.push_back(who + "found object " + hash_hex(k.hash) + " corrupt; it was committed by " +
                          (by && !by->empty() ? "engine " + *by : std::string("this process")));
    }
  auto applied = apply(core_.get(), own, s.namespace_id);
  if (core_)
    for (const auto& k : own.commits)
      core_->set_committer(k, s.engine_id);
  track(s, own, applied.done);
  if (opt_.corrupt_commits_kind != 255 && core_)
    for (const auto& k : own.commits)
      if (k.kind == opt_.corrupt_commits_kind && core_->test_corrupt(k, 4097)) {
        out.notes.push_back("faults.corrupt_commits: flipped a byte of object " + hash_hex(k.hash) +
                            " after its commit");
        ++counters_.commits_corrupted_total;
      }
  out.done = std::move(applied.done);
  apply_leases(s, step, out);
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
  refuse_foreign(step.pins, foreign_pins, out.done.pins);
  refuse_foreign(step.reserves, foreign_reserves, out.done.reserves);
  out.done.granularity = opt_.granularity;
  for (const auto& k : applied.commits_unreserved)
    out.notes.push_back(who + "commit of an object with no reservation (hash " + hash_hex(k.hash) + ")");
  for (const auto& k : applied.unpins_unpinned)
    out.notes.push_back(who + "unpin of an object that is not pinned (hash " + hash_hex(k.hash) + ")");
  return out;
}

// The session's record of what it holds, after `step` was applied and answered by `done`.
void store_sessions::track(session& s, const store_step& step, const store_step_done& done) {
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

bool store_sessions::end_lease(const lease_id& id) {
  auto it = leases_.find(id);
  if (it == leases_.end())
    return false;
  for (const auto& k : it->second.held)
    core_->release_hold(k); // false only for an object a failed pin dropped meanwhile
  leases_.erase(it);
  return true;
}

// A step's releases, then its leases (P/D, docs/pd.md), in the session's namespace: a lease holds
// the committed ones of its keys until a release names its transfer id or lease_ms pass; a new
// lease of a transfer id still held replaces it. done.leased answers each lease with the objects
// it holds.
void store_sessions::apply_leases(const session& s, const store_step& step, step_outcome& out) {
  const uint64_t ns = s.namespace_id;
  for (const auto& id : step.releases)
    if (core_ && end_lease({ns, id}))
      ++counters_.leases_released_total;
  out.done.leased.assign(step.leases.size(), 0);
  for (size_t i = 0; i < step.leases.size() && core_; ++i) {
    const auto& order = step.leases[i];
    const lease_id id{ns, order.transfer_id};
    end_lease(id);
    if (order.lease_ms <= 0)
      continue; // pd.lease_ms = 0: nothing is held
    lease l;
    l.generation = ++lease_generation_;
    for (const auto& k : order.keys)
      if (k.namespace_id == ns && core_->hold(k))
        l.held.push_back(k);
    if (l.held.empty())
      continue;
    out.done.leased[i] = static_cast<int32_t>(l.held.size());
    out.timers.push_back({ns, order.transfer_id, l.generation, order.lease_ms});
    leases_.emplace(id, std::move(l));
    ++counters_.leases_total;
  }
}

std::variant<uint64_t, std::string> store_sessions::piece(store_peer peer, const object_key& key, uint64_t offset,
                                                          uint64_t bytes, bool write) const {
  const char* what = write ? "store_write" : "store_read";
  auto sit = sessions_.find(peer);
  if (sit == sessions_.end() || !core_)
    return std::string(what) + " from an actor with no session";
  const session& s = sit->second;
  const bool held = write ? s.reservations.count(key) != 0 : s.pins.count(key) != 0;
  auto it = s.extents.find(key);
  if (!held || it == s.extents.end())
    return std::string(what) + " of object " + hex64(key.hash) + ", which this session has not " +
           (write ? "reserved" : "pinned");
  const auto [data_offset, data_bytes] = it->second;
  if (offset > data_bytes || bytes > data_bytes - offset || bytes > store_piece_max_bytes)
    return "piece [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") of object " + hex64(key.hash) +
           " lies outside its " + std::to_string(data_bytes) + " bytes (or exceeds " +
           std::to_string(store_piece_max_bytes) + " bytes)";
  return data_offset + offset;
}

std::optional<session_end> store_sessions::end_session(store_peer peer) {
  auto it = sessions_.find(peer);
  if (it == sessions_.end())
    return std::nullopt;
  session& s = it->second;
  store_step release;
  for (const auto& [k, n] : s.pins)
    for (int32_t i = 0; i < n; ++i)
      release.unpins.push_back(k);
  release.aborts.assign(s.reservations.begin(), s.reservations.end());
  if (!release.unpins.empty() || !release.aborts.empty())
    apply(core_.get(), release);
  session_end out{s.engine_id, release.unpins.size(), release.aborts.size()};
  sessions_.erase(it);
  ++counters_.sessions_ended_total;
  return out;
}

std::optional<size_t> store_sessions::lease_expired(uint64_t namespace_id, const std::string& transfer_id,
                                                    uint64_t generation) {
  auto it = leases_.find({namespace_id, transfer_id});
  if (it == leases_.end() || it->second.generation != generation)
    return std::nullopt; // released, or replaced by a newer lease of the same transfer id
  const size_t held = it->second.held.size();
  end_lease(it->first);
  ++counters_.leases_expired_total;
  return held;
}

} // namespace ordo
