// `ordo replay FILE --actor A`: folds the recorded inputs of one actor through a fresh core built
// from the recorded config, and compares every output with the recorded one, in order.
// `ordo replay FILE --node`: re-sends the recorded requests to a fresh node and compares digests.
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

#include <kj/exception.h>

#include "actors/node.hpp"
#include "messages/compare.hpp"
#include "messages/trace/trace_file.hpp"
#include "runtime/block_accounting.hpp"
#include "runtime/config.hpp"
#include "runtime/host_store.hpp"
#include "runtime/layouts.hpp"
#include "runtime/node_options.hpp"
#include "runtime/page_units.hpp"
#include "runtime/scheduler_core.hpp"
#include "runtime/sequence_check.hpp"
#include "runtime/transfer_routes.hpp"
#include "tools/trace/trace_tools.hpp"

namespace ordo {

namespace {

using any_message = trace_message;

std::string verdict_text(const object_key& k, const std::string& status) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(k.hash));
  return std::string("store_verdict ") + hash + " kind " + std::to_string(k.kind) + ": " + status;
}

// The recorded message of a record (a store verdict as its text); nothing for a header or a
// device op.
std::optional<any_message> decode(wire::TraceRecord::Reader r) {
  if (r.getPayload().isStoreVerdict()) {
    auto v = r.getPayload().getStoreVerdict();
    return any_message(verdict_text(from_capnp(v.getKey()), v.getStatus().cStr()));
  }
  return decode_trace_message(r);
}

// One output of a core, comparable with a recorded one.
struct output {
  std::string kind;
  std::string bytes; // every field, unambiguously (messages/compare.hpp)
  std::string text;  // every field, readable
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> fields; // name → (bytes, text)
};

template <class M>
std::string member_bytes(const M& m) {
  detail::field_bytes f;
  f(const_cast<M&>(m));
  return std::move(f.out);
}

template <class M>
std::string member_text(const M& m) {
  std::ostringstream os;
  detail::field_text f(os);
  f(const_cast<M&>(m));
  auto t = os.str(); // "{value}"
  t = t.size() >= 2 ? t.substr(1, t.size() - 2) : t;
  return t.size() > 240 ? t.substr(0, 240) + "…" : t;
}

// The first top-level field whose value differs, named: "num_free: recorded 508, replayed 60".
std::string first_difference(const output& recorded, const output& replayed) {
  for (size_t i = 0; i < recorded.fields.size() && i < replayed.fields.size(); ++i)
    if (recorded.fields[i].second.first != replayed.fields[i].second.first)
      return recorded.fields[i].first + ": recorded " + recorded.fields[i].second.second + ", replayed " +
             replayed.fields[i].second.second;
  return "";
}

output describe(const any_message& m) {
  return std::visit(
      [](const auto& x) -> output {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>)
          return {x.rfind("store_verdict", 0) == 0 ? "store_verdict" : "error", x, x, {}};
        else {
          output o{wire_type<T>::name, detail::field_bytes_of(x), to_debug_string(x), {}};
          for_each_field(x, [&](field_name n, const auto& m) {
            o.fields.push_back({n.cpp, {member_bytes(m), member_text(m)}});
          });
          return o;
        }
      },
      m);
}

template <class T>
output out(const T& m) {
  return describe(any_message(m));
}
output error_out(const std::string& kind, const std::string& why) { return describe(any_message(kind + ": " + why)); }

// A fresh core's outputs are compared with the recorded ones as they come.
class comparer {
public:
  explicit comparer(std::string actor) : actor_(std::move(actor)) {}
  void produced(output o) { pending_.push_back(std::move(o)); }
  // A recorded output: false (and a report) at the first divergence.
  bool recorded(uint64_t seq, const any_message& m) {
    auto want = describe(m);
    ++compared_;
    if (pending_.empty()) {
      report(seq, want.kind, "the run sent " + want.text + "; the replayed core sent nothing here");
      return false;
    }
    auto got = std::move(pending_.front());
    pending_.pop_front();
    if (got.kind != want.kind) {
      report(seq, want.kind, "the run sent a " + want.kind + "; the replayed core a " + got.kind + "\n  recorded: " +
                                 want.text + "\n  replayed: " + got.text);
      return false;
    }
    if (got.bytes != want.bytes) {
      auto field = first_difference(want, got);
      report(seq, want.kind,
             (field.empty() ? std::string("fields differ") : "first differing field " + field) +
                 "\n  recorded: " + want.text + "\n  replayed: " + got.text);
      return false;
    }
    return true;
  }
  bool finish() {
    if (pending_.empty())
      return true;
    report(0, pending_.front().kind, "the replayed core sent more than the run recorded: " + pending_.front().text);
    return false;
  }
  uint64_t compared() const { return compared_; }

private:
  void report(uint64_t seq, const std::string& kind, const std::string& what) {
    std::cout << "replay " << actor_ << ": DIVERGED at record " << seq << " (" << kind << "): " << what << "\n";
  }
  std::string actor_;
  std::deque<output> pending_;
  uint64_t compared_ = 0;
};

struct recorded_setup {
  node_config cfg;
  node_options opts;
};

recorded_setup setup_from(const trace_contents& trace, const std::vector<std::string>& sets) {
  recorded_setup s;
  s.cfg = parse_config(trace.header().getConfigText().cStr(), sets);
  s.cfg.trace_path.clear();
  auto facts_cfg = s.cfg;
  facts_cfg.device_kind = device_kind::cpu; // the facts below do not depend on the device
  auto dev = make_cpu_device({});
  model mdl(load_model_options(facts_cfg), *dev);
  const page_units units(mdl.kv_fields(), mdl.state_slots());
  node_model_facts facts;
  facts.geometry = mdl.geometry();
  facts.dims = mdl.dims();
  facts.state_layout_id = state_layout_id(mdl.state_slots());
  facts.units_per_image = units.units_per_image();
  facts.unit_bytes = units.unit_bytes();
  s.opts = derive_node_options(s.cfg, facts);
  // A tf32 run's namespace names its device: keep the recorded one.
  s.opts.scheduler.namespace_id = trace.header().getNamespaceId();
  if (s.opts.offload)
    s.opts.offload->namespace_id = trace.header().getNamespaceId();
  return s;
}

// Each actor's fresh core: consume(in-record) produces outputs into the comparer.
struct replayer {
  virtual ~replayer() = default;
  virtual void consume(const any_message& in, uint64_t ts_ns, comparer& cmp) = 0;
};

// Collects what the scheduler shell would send (dispatch), for comparison.
struct replay_sink {
  comparer& cmp;
  template <class T>
  void ended(const T&) const {}
  template <class T>
  void answer(bool, T&& m) const { cmp.produced(out(m)); }
  void stats() const {}
  template <class T>
  void command(T&& m) const { cmp.produced(out(m)); }
};

struct scheduler_replayer : replayer {
  scheduler_core core;
  std::map<uint64_t, bool> requesters, evicters; // request id → (no client to name: only known or not)
  explicit scheduler_replayer(const scheduler_options& o) : core(o) {}

  void consume(const any_message& in, uint64_t ts_ns, comparer& cmp) override {
    double now = static_cast<double>(ts_ns) / 1e6;
    scheduler_commands c;
    if (auto* r = std::get_if<completion_request>(&in)) {
      requesters[r->request_id] = true;
      c = core.apply(*r, now);
    } else if (auto* x = std::get_if<cancel_request>(&in)) {
      requesters.erase(x->request_id);
      c = core.apply(*x, now);
    } else if (auto* e = std::get_if<evict_request>(&in)) {
      evicters[e->request_id] = true;
      c = core.apply(*e, now);
    } else if (auto* s = std::get_if<std::string>(&in)) {
      c = core.refused(*s);
    } else {
      std::visit(
          [&](const auto& m) {
            using T = std::decay_t<decltype(m)>;
            if constexpr (std::is_constructible_v<scheduler_event, T> && !std::is_same_v<T, completion_request> &&
                          !std::is_same_v<T, cancel_request> && !std::is_same_v<T, evict_request>)
              c = core.apply(m, now);
          },
          in);
    }
    // What actors/scheduler.cpp sends, in its order, to the clients it still knows.
    dispatch(c, requesters, evicters, replay_sink{cmp});
  }
};

struct block_pool_replayer : replayer {
  block_accounting core;
  sequence_check order;
  block_pool_replayer(int32_t blocks, int32_t block_size) : core(blocks, block_size) {}
  void consume(const any_message& in, uint64_t, comparer& cmp) override {
    auto* step = std::get_if<pool_step>(&in);
    if (!step)
      return;
    if (auto why = order.accept(step->header.epoch, step->header.seq); !why.empty())
      return cmp.produced(error_out("pool_step_done", why));
    cmp.produced(out(core.apply(*step)));
  }
};

// The connector's core (runtime/transfer_routes) driven as actors/connector.cpp drives it. The
// recorded answers are taken in the order their requests went out, which is their order with one
// store (none, offload, store); P/D and multi need them matched by store (issue 38 item 4).
struct connector_replayer : replayer {
  transfer_routes core;
  sequence_check steps;
  std::deque<std::pair<connector_lookup, lookup_ask>> lookups; // awaiting the store's answer, in order
  struct pending_step {
    split_step split;
    std::vector<store_step_done> answers;
  };
  std::deque<pending_step> waiting;
  explicit connector_replayer(route_table routes) : core(std::move(routes)) {}
  void looked(const connector_lookup& l, lookup_next next, comparer& cmp) {
    if (!next.ask)
      return cmp.produced(out(*next.done));
    cmp.produced(out(next.ask->probe));
    lookups.emplace_back(l, *next.ask);
  }
  void consume(const any_message& in, uint64_t, comparer& cmp) override {
    if (auto* l = std::get_if<connector_lookup>(&in)) {
      looked(*l, core.start_lookup(*l), cmp);
    } else if (auto* s = std::get_if<connector_step>(&in)) {
      if (auto why = steps.accept(s->header.epoch, s->header.seq); !why.empty())
        return cmp.produced(error_out("connector_step_done", why));
      auto split = core.split(*s);
      if (split.parts.empty())
        return cmp.produced(out(core.merge(split, {})));
      for (const auto& part : split.parts)
        cmp.produced(out(part.step));
      waiting.push_back({std::move(split), {}});
    } else if (auto* found = std::get_if<store_contains_done>(&in)) {
      if (lookups.empty())
        return;
      auto [lookup, asked] = std::move(lookups.front());
      lookups.pop_front();
      looked(lookup, core.lookup_answered(lookup, asked, *found), cmp);
    } else if (auto* answer = std::get_if<store_step_done>(&in)) {
      if (waiting.empty())
        return;
      auto& w = waiting.front();
      w.answers.push_back(*answer);
      if (w.answers.size() < w.split.parts.size())
        return;
      try {
        cmp.produced(out(core.merge(w.split, w.answers)));
      } catch (const std::exception& e) {
        cmp.produced(error_out("connector_step_done", e.what()));
      }
      waiting.pop_front();
    }
  }
};

struct store_replayer : replayer {
  std::unique_ptr<uint8_t, decltype(&std::free)> arena{nullptr, &std::free};
  std::unique_ptr<host_store> core;
  sequence_check steps;
  explicit store_replayer(size_t bytes) {
    if (bytes > 0) {
      arena.reset(static_cast<uint8_t*>(std::calloc(bytes, 1)));
      if (!arena)
        throw std::runtime_error("cannot allocate the " + std::to_string(bytes >> 20) + " MiB store arena");
      core = std::make_unique<host_store>(arena.get(), bytes);
    }
  }
  void consume(const any_message& in, uint64_t, comparer& cmp) override {
    if (auto* q = std::get_if<store_contains>(&in)) {
      cmp.produced(out(apply(core.get(), *q)));
    } else if (auto* s = std::get_if<store_step>(&in)) {
      if (auto why = steps.accept(s->header.epoch, s->header.seq); !why.empty())
        return cmp.produced(error_out("store_step_done", why));
      // The replay's arena holds none of the recorded bytes (zeros, and the flips of store_corrupt).
      // A node whose transfers sum their checksums (every preset's) sent the checksums with its
      // commits and pinned without hashing, so the replay answers as the store did; a commit
      // without one hashes the replay's arena, and its pins' checksums then differ.
      auto applied = apply(core.get(), *s);
      for (const auto& g : applied.done.pins)
        cmp.produced(describe(any_message(verdict_text(g.key, g.status))));
      cmp.produced(out(applied.done));
    } else if (auto* c = std::get_if<store_corrupt>(&in)) {
      if (core)
        core->test_corrupt_all(c->kind);
    }
  }
};

int replay_actor(const trace_contents& trace, const replay_options& o) {
  auto setup = setup_from(trace, o.sets);
  std::unique_ptr<replayer> core;
  if (o.actor == "scheduler")
    core = std::make_unique<scheduler_replayer>(setup.opts.scheduler);
  else if (o.actor == "block_pool")
    core = std::make_unique<block_pool_replayer>(setup.cfg.num_blocks, setup.cfg.block_size);
  else if (o.actor == "connector")
    core = std::make_unique<connector_replayer>(setup.opts.routes);
  else if (o.actor == "store")
    core = std::make_unique<store_replayer>(setup.opts.host_arena_bytes);
  else {
    std::cerr << "ordo replay: --actor " << o.actor << ": must be scheduler, block_pool, connector or store\n";
    return 2;
  }
  comparer cmp(o.actor);
  uint64_t inputs = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    auto r = trace[i];
    if (o.actor != r.getActor().cStr())
      continue;
    auto m = decode(r);
    if (!m)
      continue;
    if (r.getDirection() == wire::TraceDirection::IN) {
      core->consume(*m, r.getTsNs(), cmp);
      ++inputs;
    } else if (!cmp.recorded(r.getSeq(), *m)) {
      std::cout << "replay " << o.actor << ": " << inputs << " inputs replayed, " << cmp.compared() - 1
                << " outputs identical before the divergence\n";
      return 1;
    }
  }
  // A file cut short may end between an input and its outputs: only a complete file must match to the end.
  if (!trace.truncated && !cmp.finish())
    return 1;
  std::cout << "replayed " << inputs << " events of " << o.actor << ": identical (" << cmp.compared()
            << " outputs compared" << (trace.truncated ? "; file cut short: " + trace.truncation : std::string())
            << ")\n";
  return 0;
}

int replay_node(const trace_contents& trace, const replay_options& o) {
  auto sets = o.sets;
  sets.push_back("server.port=0");
  auto setup = setup_from(trace, sets);
  // The recorded requests (as the scheduler got them) and their recorded answers.
  std::vector<any_message> inputs;
  std::set<uint64_t> cancelled;
  std::map<uint64_t, completion_result> recorded;
  for (size_t i = 0; i < trace.size(); ++i) {
    auto r = trace[i];
    std::string actor = r.getActor().cStr();
    auto dir = r.getDirection();
    if (actor == "scheduler" && dir == wire::TraceDirection::IN) {
      auto m = decode(r);
      if (m && (std::holds_alternative<completion_request>(*m) || std::holds_alternative<evict_request>(*m)))
        inputs.push_back(*m);
      if (m && std::holds_alternative<cancel_request>(*m))
        cancelled.insert(std::get<cancel_request>(*m).request_id);
    } else if (actor == "scheduler" && dir == wire::TraceDirection::OUT && r.getPayload().isCompletionResult()) {
      auto res = from_capnp(r.getPayload().getCompletionResult());
      recorded[res.request_id] = res;
    }
  }
  node n(setup.cfg);
  n.start();
  size_t compared = 0, skipped = 0;
  for (const auto& m : inputs) {
    if (auto* e = std::get_if<evict_request>(&m)) {
      if (!n.evict(*e, std::chrono::seconds(60))) {
        std::cout << "replay node: the evict request " << e->request_id << " got no answer within 60 s\n";
        return 1;
      }
      continue;
    }
    const auto& req = std::get<completion_request>(m);
    auto it = recorded.find(req.request_id);
    if (cancelled.count(req.request_id) || it == recorded.end()) {
      ++skipped; // cancelled, refused or unanswered in the recorded run: nothing to compare
      continue;
    }
    auto answer = n.complete(req, std::chrono::seconds(600));
    if (auto* f = std::get_if<completion_failed>(&answer)) {
      std::cout << "replay node: request " << req.request_id << " failed on replay: " << f->message << "\n";
      return 1;
    }
    const auto& got = std::get<completion_result>(answer);
    ++compared;
    if (got.logits_digest != it->second.logits_digest || got.token_ids != it->second.token_ids) {
      std::cout << "replay node: DIVERGED at request " << req.request_id << " (" << compared
                << "th compared): recorded digest " << std::hex << it->second.logits_digest << ", replayed "
                << got.logits_digest << std::dec << "; tokens " << (got.token_ids == it->second.token_ids ? "equal" : "differ")
                << "\n";
      return 1;
    }
  }
  n.drain_and_stop();
  std::cout << "replayed " << compared << " requests into a fresh node: every logits digest identical (" << skipped
            << " cancelled or unanswered skipped)\n";
  return 0;
}

} // namespace

int run_replay(const replay_options& o) {
  try {
    auto trace = read_trace(o.path);
    return o.node ? replay_node(trace, o) : replay_actor(trace, o);
  } catch (const kj::Exception& e) { // before std::exception: its what() carries a stack trace
    std::cerr << "ordo replay: " << o.path << ": " << e.getDescription().cStr() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ordo replay: " << e.what() << "\n";
    return 2;
  }
}

} // namespace ordo
