#include "tools/trace/trace_flows.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "messages/compare.hpp"

namespace ordo {

namespace {

// The start stamps (startUnixMs) are whole milliseconds, so two files' starts are known to less
// than 1 ms apart; 2 ms leaves room for the two clock reads at each start.
constexpr int64_t start_tolerance_ns = 2'000'000;
constexpr const char* peer_lane_prefix = "peer:";     // actors/node.cpp names a P/D peer's store client so
constexpr const char* remote_sender_prefix = "remote-"; // actors/door.hpp: "remote-<actor id>@<node>"

enum class store_kind { contains, step };
const char* request_name(store_kind k) { return k == store_kind::contains ? "store_contains" : "store_step"; }
const char* answer_name(store_kind k) { return k == store_kind::contains ? "store_contains_done" : "store_step_done"; }

// One request and its answer as one side recorded them, contents reduced to what the client
// hands through unchanged.
struct exchange {
  size_t in = 0, out = 0; // record indexes
  uint64_t in_ns = 0, out_ns = 0;
  std::string lane;
  trace_message request, answer;
  std::vector<uint64_t> grant_offsets; // the granted objects' data offsets, cleared in `answer`
  command_header header;               // the request's own (the prefill side orders steps by it)
  size_t session_rank = 0;             // prefill side: when its sender was first seen
};

// The header differs on purpose (the connector's channel at the client, the session's at the
// server); a granted offset moves by the window the peer's arena is mapped at; leases and
// releases are not handed through.
void reduce(exchange& x) {
  if (auto* s = std::get_if<store_step>(&x.request)) {
    x.header = s->header;
    s->header = {};
    s->leases.clear();
    s->releases.clear();
  }
  if (auto* d = std::get_if<store_step_done>(&x.answer)) {
    d->header = {};
    d->leased.clear();
    for (auto* grants : {&d->pins, &d->reserves})
      for (auto& g : *grants)
        if (g.ok) {
          x.grant_offsets.push_back(g.data_offset);
          g.data_offset = 0;
        }
  }
}

std::optional<store_kind> request_kind(const trace_message& m) {
  if (std::holds_alternative<store_contains>(m))
    return store_kind::contains;
  if (std::holds_alternative<store_step>(m))
    return store_kind::step;
  return std::nullopt;
}

bool is_answer(const trace_message& m, store_kind k) {
  return k == store_kind::contains ? std::holds_alternative<store_contains_done>(m)
                                   : std::holds_alternative<store_step_done>(m);
}

// An error record standing for an answer of kind k ("store_step_done: why").
bool is_error_for(const trace_message& m, store_kind k) {
  auto* text = std::get_if<std::string>(&m);
  return text && text->rfind(std::string(answer_name(k)) + ":", 0) == 0;
}

using exchanges = std::map<store_kind, std::vector<exchange>>;

// Decode side: each "peer:HOST:PORT" lane's answered exchanges, in the order the client took them.
// A step's answer carries its request's header; lookups are answered in the order they came.
std::map<std::string, exchanges> client_exchanges(const trace_contents& t) {
  std::map<std::string, exchanges> out;
  std::map<std::tuple<std::string, std::string, uint64_t, uint64_t>, exchange> steps; // lane, peer, header
  std::map<std::pair<std::string, std::string>, std::deque<exchange>> lookups;       // lane, peer
  for (size_t i = 0; i < t.size(); ++i) {
    auto r = t[i];
    std::string lane = r.getActor().cStr();
    if (lane.rfind(peer_lane_prefix, 0) != 0 || r.getDirection() == wire::TraceDirection::LOCAL)
      continue;
    auto m = decode_trace_message(r);
    if (!m)
      continue;
    std::string peer = r.getPeer().cStr();
    if (r.getDirection() == wire::TraceDirection::IN) {
      auto k = request_kind(*m);
      if (!k)
        continue;
      exchange x;
      x.in = i;
      x.in_ns = r.getTsNs();
      x.lane = lane;
      x.request = std::move(*m);
      if (*k == store_kind::step) {
        auto h = std::get<store_step>(x.request).header;
        steps[{lane, peer, h.epoch, h.seq}] = std::move(x);
      } else {
        lookups[{lane, peer}].push_back(std::move(x));
      }
      continue;
    }
    std::optional<exchange> done;
    if (auto* d = std::get_if<store_step_done>(&*m)) {
      auto it = steps.find({lane, peer, d->header.epoch, d->header.seq});
      if (it == steps.end())
        continue;
      done = std::move(it->second);
      steps.erase(it);
    } else if (is_answer(*m, store_kind::contains) || is_error_for(*m, store_kind::contains)) {
      auto& q = lookups[{lane, peer}];
      if (q.empty())
        continue;
      done = std::move(q.front());
      q.pop_front();
    }
    if (!done || std::holds_alternative<std::string>(*m)) // an error answer is no exchange to pair
      continue;
    done->out = i;
    done->out_ns = r.getTsNs();
    done->answer = std::move(*m);
    reduce(*done);
    auto kind = *request_kind(done->request);
    out[lane][kind].push_back(std::move(*done));
  }
  for (auto& [lane, by_kind] : out)
    for (auto& [kind, xs] : by_kind)
      std::sort(xs.begin(), xs.end(), [](const exchange& a, const exchange& b) { return a.in < b.in; });
  return out;
}

// Prefill side: per remote node ("…@<node>"), the store's answered exchanges with its sessions.
// The server answers in the handler, so a request's answer is the actor's next `out`, to the
// same sender. Steps are ordered by their (gen, seq) header, which the client stamps in the order
// it took them; lookups by session, then arrival.
std::map<std::string, exchanges> server_exchanges(const trace_contents& t) {
  std::map<std::string, exchanges> out;
  std::map<std::string, size_t> first_seen; // sender -> index of its first record
  std::map<std::string, size_t> open;       // actor -> index into `pending` of the request it is handling
  std::vector<exchange> pending;
  for (size_t i = 0; i < t.size(); ++i) {
    auto r = t[i];
    std::string actor = r.getActor().cStr(), peer = r.getPeer().cStr();
    if (r.getDirection() == wire::TraceDirection::LOCAL)
      continue;
    auto handling = open.find(actor);
    if (r.getDirection() == wire::TraceDirection::IN) {
      if (handling != open.end())
        open.erase(handling); // the previous request of this actor got no answer it recorded
      if (peer.rfind(remote_sender_prefix, 0) != 0 || peer.find('@') == std::string::npos)
        continue;
      first_seen.emplace(peer, i);
      auto m = decode_trace_message(r);
      if (!m || !request_kind(*m))
        continue;
      exchange x;
      x.in = i;
      x.in_ns = r.getTsNs();
      x.lane = actor;
      x.request = std::move(*m);
      x.session_rank = first_seen[peer];
      open[actor] = pending.size();
      pending.push_back(std::move(x));
      continue;
    }
    if (handling == open.end() || peer != t[pending[handling->second].in].getPeer().cStr())
      continue;
    exchange& x = pending[handling->second];
    open.erase(handling);
    auto m = decode_trace_message(r);
    auto kind = *request_kind(x.request);
    if (!m || !is_answer(*m, kind))
      continue; // an error, or not this request's answer
    x.out = i;
    x.out_ns = r.getTsNs();
    x.answer = std::move(*m);
    reduce(x);
    std::string sender = t[x.in].getPeer().cStr();
    out[sender.substr(sender.rfind('@') + 1)][kind].push_back(std::move(x));
  }
  for (auto& [node, by_kind] : out)
    for (auto& [kind, xs] : by_kind)
      std::sort(xs.begin(), xs.end(), [](const exchange& a, const exchange& b) {
        if (a.header.epoch != b.header.epoch || a.header.seq != b.header.seq) // (0, 0) for lookups
          return std::tie(a.header.epoch, a.header.seq) < std::tie(b.header.epoch, b.header.seq);
        return std::tie(a.session_rank, a.in) < std::tie(b.session_rank, b.in);
      });
  return out;
}

// Could `server` be the client's exchange `client` seen from the other node? delta0_ns: the
// server file's start minus the client file's, from their start stamps.
bool same_exchange(const exchange& server, const exchange& client, int64_t delta0_ns) {
  if (!(server.request == client.request) || !(server.answer == client.answer))
    return false;
  if (server.grant_offsets.size() != client.grant_offsets.size())
    return false;
  for (size_t i = 0; i < server.grant_offsets.size(); ++i)
    if (client.grant_offsets[i] < server.grant_offsets[i] ||
        client.grant_offsets[i] - server.grant_offsets[i] != client.grant_offsets[0] - server.grant_offsets[0])
      return false;
  // the client took the request before the server did and had the answer after it was sent
  const int64_t sent_before = static_cast<int64_t>(client.in_ns) - static_cast<int64_t>(server.in_ns);
  const int64_t got_after = static_cast<int64_t>(client.out_ns) - static_cast<int64_t>(server.out_ns);
  return sent_before <= delta0_ns + start_tolerance_ns && got_after >= delta0_ns - start_tolerance_ns;
}

enum class fit_outcome { none, unique, ambiguous };

// Every server exchange in order onto a distinct client exchange, order kept. The leftmost and
// the rightmost such fits bound every other one, so when they agree the fit is the only one.
fit_outcome fit(const std::vector<exchange>& server, const std::vector<exchange>& client, int64_t delta0_ns,
                std::vector<size_t>& at) {
  const size_t m = server.size(), n = client.size();
  std::vector<size_t> left(m), right(m);
  size_t k = 0;
  for (size_t j = 0; j < m; ++j, ++k) {
    while (k < n && !same_exchange(server[j], client[k], delta0_ns))
      ++k;
    if (k == n)
      return fit_outcome::none;
    left[j] = k;
  }
  k = n;
  for (size_t j = m; j-- > 0; --k) {
    while (k > 0 && !same_exchange(server[j], client[k - 1], delta0_ns))
      --k;
    if (k == 0)
      return fit_outcome::none;
    right[j] = k - 1;
  }
  if (left != right)
    return fit_outcome::ambiguous;
  at = std::move(left);
  return fit_outcome::unique;
}

struct link {
  size_t client_file;
  std::string client_lane;
  size_t server_file;
  std::string server_node;
  std::map<store_kind, fit_outcome> outcomes;
  std::map<store_kind, std::vector<size_t>> at; // per kind: server exchange j -> client exchange at[j]
};

std::string node_name(const trace_contents& t) { return t.header().getNode().cStr(); }

} // namespace

node_flows match_node_flows(const std::vector<trace_contents>& files) {
  node_flows result;
  result.shift_us.assign(files.size(), 0.0);
  std::vector<std::map<std::string, exchanges>> clients, servers;
  for (const auto& f : files) {
    clients.push_back(client_exchanges(f));
    servers.push_back(server_exchanges(f));
  }
  auto start_ns = [&](size_t f) { return static_cast<int64_t>(files[f].header().getStartUnixMs()) * 1'000'000; };

  // Each remote node a store served, with the one peer client whose exchanges it fits.
  std::vector<link> links;
  for (size_t p = 0; p < files.size(); ++p)
    for (const auto& [node, served] : servers[p]) {
      std::vector<link> fitting;
      for (size_t d = 0; d < files.size(); ++d) {
        if (d == p)
          continue;
        for (const auto& [lane, asked] : clients[d]) {
          link l{d, lane, p, node, {}, {}};
          bool fits = true;
          for (const auto& [kind, xs] : served) {
            auto c = asked.find(kind);
            static const std::vector<exchange> none;
            l.outcomes[kind] = fit(xs, c == asked.end() ? none : c->second, start_ns(p) - start_ns(d), l.at[kind]);
            fits = fits && l.outcomes[kind] != fit_outcome::none;
          }
          if (fits)
            fitting.push_back(std::move(l));
        }
      }
      const std::string who = node_name(files[p]) + "'s store requests from remote node " + node;
      if (fitting.size() == 1)
        links.push_back(std::move(fitting.front()));
      else if (fitting.size() > 1)
        result.refusals.push_back(who + " fit " + std::to_string(fitting.size()) +
                                  " peer clients alike: no flows drawn for them");
      else
        result.refusals.push_back(who + " fit no merged file's peer client (is the decode node's trace among "
                                        "the files?): no flows drawn for them");
    }

  // A client's exchange belongs to one server exchange at most.
  std::set<std::tuple<size_t, std::string, store_kind, size_t>> taken;
  std::vector<std::pair<int64_t, int64_t>> offset_bounds(files.size(), {INT64_MIN, INT64_MAX}); // server start, ns
  std::vector<bool> bounded(files.size(), false);
  for (auto& l : links) {
    const auto& served = servers[l.server_file].at(l.server_node);
    const auto& asked = clients[l.client_file].at(l.client_lane);
    const std::string peer = node_name(files[l.server_file]), client = node_name(files[l.client_file]);
    bool clash = false;
    int64_t lo = INT64_MIN, hi = INT64_MAX; // server start minus client start, as the pairs allow
    for (auto& [kind, outcome] : l.outcomes) {
      if (outcome != fit_outcome::unique)
        continue;
      const auto& xs = served.at(kind);
      for (size_t j = 0; j < xs.size(); ++j) {
        const exchange& c = asked.at(kind)[l.at[kind][j]];
        clash = clash || taken.count({l.client_file, l.client_lane, kind, l.at[kind][j]}) != 0;
        lo = std::max(lo, static_cast<int64_t>(c.in_ns) - static_cast<int64_t>(xs[j].in_ns));
        hi = std::min(hi, static_cast<int64_t>(c.out_ns) - static_cast<int64_t>(xs[j].out_ns));
      }
    }
    if (clash || lo > hi) {
      result.refusals.push_back(client + "'s " + l.client_lane + " and " + peer + "'s store: " +
                                (clash ? "the same requests fit two servers" : "the paired times disagree") +
                                ": no flows drawn for them");
      continue;
    }
    std::string counts;
    for (auto& [kind, outcome] : l.outcomes) {
      if (outcome == fit_outcome::ambiguous) {
        result.refusals.push_back(client + "'s " + l.client_lane + " and " + peer + "'s store: the " +
                                  request_name(kind) + "s fit in more than one way (equal requests and answers): " +
                                  "no flows drawn for them");
        continue;
      }
      const auto& xs = served.at(kind);
      for (size_t j = 0; j < xs.size(); ++j) {
        const size_t k = l.at[kind][j];
        const exchange& c = asked.at(kind)[k];
        taken.insert({l.client_file, l.client_lane, kind, k});
        const uint64_t id = (static_cast<uint64_t>(l.client_file + 1) << 40) + 2 * (c.in + 1);
        const std::string name = "pull from " + peer + ": ";
        result.flows.push_back({name + request_name(kind), id, {l.client_file, l.client_lane, c.in_ns},
                                {l.server_file, xs[j].lane, xs[j].in_ns}});
        result.flows.push_back({name + answer_name(kind), id + 1, {l.server_file, xs[j].lane, xs[j].out_ns},
                                {l.client_file, l.client_lane, c.out_ns}});
      }
      counts += (counts.empty() ? "" : ", ") + std::to_string(xs.size()) + " " + request_name(kind);
    }
    if (lo <= hi && lo != INT64_MIN) {
      auto& b = offset_bounds[l.server_file];
      b.first = std::max(b.first, start_ns(l.client_file) + lo);
      b.second = std::min(b.second, start_ns(l.client_file) + hi);
      bounded[l.server_file] = true;
    }
    if (!counts.empty())
      result.links.push_back(client + " pulls from " + peer + ": " + counts);
  }

  // Move each serving file's start within what its pairs allow (clients' files stay put).
  for (size_t p = 0; p < files.size(); ++p) {
    auto [lo, hi] = offset_bounds[p];
    if (!bounded[p] || lo > hi)
      continue;
    const int64_t moved = std::clamp(start_ns(p), lo, hi);
    result.shift_us[p] = static_cast<double>(moved - start_ns(p)) / 1000.0;
  }
  return result;
}

} // namespace ordo
