// The one door of every actor (DESIGN §5, docs/traces.md): each message an actor receives
// passes door::received, and each message it sends, requests or answers passes door::send,
// door::request or door::reply. The trace recorder taps messages here and nowhere else.
// Without a recorder a door costs one branch per message.
// NOTE(peers): records name actors, not ids: the node names every actor it spawns
// (actor_names::add); a sender it did not spawn (an HTTP thread's anon_send, a test's scoped
// actor) is "anonymous"; an actor of another process (a P/D peer's session) is
// "remote-<id>@<its node>", so each remote sender is its own channel in `trace check`.
// NOTE(time): received() returns the time it stamped on the record; a shell hands that same
// value to its core, so a replay from the file decides with the times the run had.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/sec.hpp>

#include "messages/trace/trace_file.hpp"

namespace ordo {

class actor_names {
public:
  void add(caf::actor_id id, std::string name) {
    std::lock_guard<std::mutex> lock(mu_);
    names_[id] = std::move(name);
  }
  std::string of(caf::actor_id id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = names_.find(id);
    return it == names_.end() ? std::string("anonymous") : it->second;
  }

private:
  mutable std::mutex mu_;
  std::map<caf::actor_id, std::string> names_;
};

// A name that lives as long as the process, for a door named at run time (a P/D peer's store
// client): trace records keep the actor name as a pointer until the writer thread has them.
inline const char* interned_name(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  return names.insert(name).first->c_str();
}

// What a node gives each actor it spawns: the recorder (null when trace.path is unset) and the
// names of its peers.
struct trace_tap {
  std::shared_ptr<trace_recorder> recorder;
  std::shared_ptr<actor_names> names = std::make_shared<actor_names>();
};

// The reply type of each request an actor makes.
template <class T>
struct reply_of;
template <>
struct reply_of<pool_step> { using type = pool_step_done; };
template <>
struct reply_of<connector_lookup> { using type = connector_lookup_done; };
template <>
struct reply_of<connector_step> { using type = connector_step_done; };
template <>
struct reply_of<step_plan> { using type = step_done; };
template <>
struct reply_of<store_contains> { using type = store_contains_done; };
template <>
struct reply_of<store_step> { using type = store_step_done; };
template <>
struct reply_of<store_hello> { using type = store_welcome; };

class door {
public:
  door() = default;
  door(const char* actor, trace_tap tap) : actor_(actor), tap_(std::move(tap)) {}

  const char* actor() const { return actor_; }
  bool recording() const { return tap_.recorder != nullptr; }

  // Milliseconds on the clock every record of this node uses (for a core's `now_ms`).
  double now_ms() const { return static_cast<double>(now_ns()) / 1e6; }
  uint64_t now_ns() const {
    if (tap_.recorder)
      return tap_.recorder->now_ns();
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }

  // A message the actor took from its mailbox, sent by `from`. Returns the time stamped on it.
  template <class T>
  uint64_t received(const caf::strong_actor_ptr& from, const T& m) const {
    uint64_t ts = now_ns();
    if (tap_.recorder)
      tap_.recorder->message(actor_, trace_direction::in, name_of(from), m, ts);
    return ts;
  }

  // A message from a sender that is not an actor (the runner's device callback: "device").
  template <class T>
  uint64_t received(const char* from, const T& m) const {
    uint64_t ts = now_ns();
    if (tap_.recorder)
      tap_.recorder->message(actor_, trace_direction::in, from, m, ts);
    return ts;
  }

  template <class Self, class Handle, class T>
  void send(Self* self, const Handle& to, T&& m) const {
    if (tap_.recorder)
      tap_.recorder->message(actor_, trace_direction::out, name_of(to), m);
    self->send(to, std::forward<T>(m));
  }

  // Requests `m` from `to`; the reply (recorded as received) goes to on_reply(reply&, ts_ns)
  // with the time stamped on its record, an error (recorded as one) to on_error.
  template <class Self, class Handle, class T, class OnReply, class OnError>
  void request(Self* self, const Handle& to, T m, OnReply on_reply, OnError on_error) const {
    using reply = typename reply_of<T>::type;
    std::string peer = tap_.recorder ? name_of(to) : std::string();
    if (tap_.recorder)
      tap_.recorder->message(actor_, trace_direction::out, peer, m);
    self->request(to, caf::infinite, std::move(m))
        .then(
            [d = *this, peer, on_reply](reply& r) mutable {
              uint64_t ts = d.now_ns();
              if (d.tap_.recorder)
                d.tap_.recorder->message(d.actor_, trace_direction::in, peer, r, ts);
              on_reply(r, ts);
            },
            [d = *this, peer, on_error](caf::error& err) mutable {
              if (d.tap_.recorder)
                d.tap_.recorder->error(d.actor_, trace_direction::in, peer, wire_type<reply>::name,
                                       caf::to_string(err));
              on_error(err);
            });
  }

  // Requests each `messages[i]` from `to[i]` at once; once every one is answered, calls
  // done(answers, error) with the answers in that order and the first error (if any).
  template <class Self, class Handle, class T, class Done>
  void request_all(Self* self, const std::vector<Handle>& to, std::vector<T> messages, Done done) const {
    using reply = typename reply_of<T>::type;
    struct pending {
      std::vector<reply> answers;
      size_t left = 0;
      caf::error failure;
    };
    if (messages.empty()) {
      std::vector<reply> none;
      return done(none, caf::error{});
    }
    auto all = std::make_shared<pending>();
    all->answers.resize(messages.size());
    all->left = messages.size();
    auto arrived = [all, done]() mutable {
      if (--all->left == 0)
        done(all->answers, all->failure);
    };
    for (size_t i = 0; i < messages.size(); ++i)
      request(
          self, to[i], std::move(messages[i]),
          [all, i, arrived](reply& r, uint64_t) mutable {
            all->answers[i] = std::move(r);
            arrived();
          },
          [all, arrived](caf::error& err) mutable {
            if (!all->failure)
              all->failure = err;
            arrived();
          });
  }

  // The answer the actor returns to the sender of the message it is handling.
  template <class Self, class T>
  T reply(Self* self, T m) const {
    if (tap_.recorder)
      tap_.recorder->message(actor_, trace_direction::out, name_of(self->current_sender()), m);
    return m;
  }
  // An answer delivered later through a promise, to `to` (the requester, remembered when the
  // request came in).
  template <class Promise, class T>
  void deliver(Promise& rp, const caf::strong_actor_ptr& to, T m) const {
    if (tap_.recorder)
      tap_.recorder->message(actor_, trace_direction::out, name_of(to), m);
    rp.deliver(std::move(m));
  }
  // A promise broken with an error instead of its answer.
  template <class Promise>
  void fail(Promise& rp, const caf::strong_actor_ptr& to, const char* kind, caf::error err) const {
    if (tap_.recorder)
      tap_.recorder->error(actor_, trace_direction::out, name_of(to), kind, caf::to_string(err));
    rp.deliver(std::move(err));
  }
  // A request refused with an error instead of its reply.
  template <class Self>
  caf::error refuse(Self* self, const char* kind, const std::string& why) const {
    if (tap_.recorder)
      tap_.recorder->error(actor_, trace_direction::out, name_of(self->current_sender()), kind, why);
    return caf::make_error(caf::sec::invalid_argument, why);
  }

  const trace_tap& tap() const { return tap_; }

private:
  std::string name_of(const caf::strong_actor_ptr& p) const {
    if (!p)
      return "anonymous";
    if (p->home_system && p->node() != p->home_system->node())
      return "remote-" + std::to_string(p->id()) + "@" + std::to_string(std::hash<caf::node_id>{}(p->node()) % 1000000007);
    return tap_.names->of(p->id());
  }
  template <class Handle>
  std::string name_of(const Handle& h) const {
    return h ? tap_.names->of(h.id()) : std::string("anonymous");
  }

  const char* actor_ = "";
  trace_tap tap_;
};

} // namespace ordo
