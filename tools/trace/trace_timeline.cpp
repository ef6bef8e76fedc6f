// `ordo trace timeline FILE... -o OUT.json` (docs/traces.md): Chrome trace event JSON that
// Perfetto (ui.perfetto.dev) and chrome://tracing open. One process per file (its node), one
// thread per actor lane and per device stream lane; files share a clock through the header's
// startUnixMs.
//   device ops: an `X` slice on its stream lane from max(its enqueue record, the end of the
//     stream's previous slice, the firing of the events the stream waited for before it) to its
//     `done` record (an event fires when the op enqueued before its event_record is done); event_record / event_wait / complete (no
//     `done`) are instants; each event_wait gets a flow (cat "event") from its event_record.
//   handlers: each `in` record is an `X` slice on the actor's lane, from its ts to the last record
//     the actor made before its next `in` (its sends, device enqueues), at most handler_cap_us
//     later, plus handler_tail_us so the slice encloses that last record. An `out` outside any
//     handler slice gets a tiny slice of its own, so its flow arrow has something to start from.
//   messages: a flow (cat "msg", name = kind) from each `out` to the `in` it matches: the k-th
//     out of kind K from A to B is the k-th in of kind K at B from A (CAF keeps per-pair order).
//   counters: one `C` event per step_plan the scheduler sends (requests, tokens, loads, saves).
//   between nodes: a flow (cat "pd", "pull from P: store_step") from a decode node's peer client
//     to the prefill node's store and one back with the answer, for each exchange
//     tools/trace/trace_flows.cpp proves is the same on both sides; the serving file's start is moved
//     by less than a millisecond where its flows need it to point forward.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/trace/trace_file.hpp"
#include "tools/trace/trace_flows.hpp"
#include "tools/trace/trace_tools.hpp"

namespace ordo {
namespace trace_text {
std::string summary(wire::TraceRecord::Reader r); // tools/trace/trace_show.cpp
} // namespace trace_text

namespace {

using json = nlohmann::json;

constexpr double handler_cap_us = 1000.0; // a handler slice never extends past 1 ms of records
constexpr double handler_tail_us = 1.0;   // and ends just after the last record it encloses
constexpr double lone_send_us = 1.0;      // an out outside any handler slice

const char* const fixed_lanes[] = {"frontend", "scheduler", "block_pool", "connector", "store", "model_runner",
                                   "compute", "load", "save"};

const char* stream_lane(uint8_t s) { return s == 0 ? "compute" : s == 1 ? "load" : s == 2 ? "save" : "stream?"; }

std::string short_list(capnp::List<int32_t>::Reader l, size_t shown = 4) {
  std::string s;
  for (size_t i = 0; i < l.size() && i < shown; ++i)
    s += (i ? "," : "") + std::to_string(l[i]);
  if (l.size() > shown)
    s += " (+" + std::to_string(l.size() - shown) + ")";
  return s;
}

struct file_timeline {
  int pid = 0;
  double offset_us = 0; // this file's start on the common clock
  std::map<std::string, int> tids;
  json* events = nullptr;
  size_t flows = 0;

  int tid(const std::string& lane) {
    auto it = tids.find(lane);
    if (it != tids.end())
      return it->second;
    int next = 1;
    for (auto& fixed : fixed_lanes) {
      if (lane == fixed)
        break;
      ++next;
    }
    if (next > static_cast<int>(std::size(fixed_lanes)))
      next = static_cast<int>(std::size(fixed_lanes) + 1 + tids.size());
    tids[lane] = next;
    return next;
  }
  double ts(wire::TraceRecord::Reader r) const { return offset_us + static_cast<double>(r.getTsNs()) / 1000.0; }
  json event(const char* ph, const std::string& name, const std::string& lane, double ts_us) {
    return json{{"ph", ph}, {"name", name}, {"pid", pid}, {"tid", tid(lane)}, {"ts", ts_us}};
  }
  static std::string step(wire::TraceRecord::Reader r) {
    return std::to_string(r.getStepEpoch()) + "." + std::to_string(r.getStepSeq());
  }
  void flow(const char* cat, const std::string& name, uint64_t id, const std::string& from_lane, double from_ts,
            const std::string& to_lane, double to_ts) {
    uint64_t uid = (static_cast<uint64_t>(pid) << 40) + id;
    auto s = event("s", name, from_lane, from_ts);
    s["cat"] = cat;
    s["id"] = uid;
    auto f = event("f", name, to_lane, to_ts);
    f["cat"] = cat;
    f["id"] = uid;
    f["bp"] = "e";
    events->push_back(std::move(s));
    events->push_back(std::move(f));
    ++flows;
  }
};

void add_file(const trace_contents& t, file_timeline& tl) {
  json& ev = *tl.events;
  size_t n = t.size();
  auto is_done = [](wire::TraceRecord::Reader r) {
    return r.getPayload().isDeviceOp() && r.getPayload().getDeviceOp().getOp() == wire::DeviceOpKind::DONE;
  };

  // --- device ops -------------------------------------------------------------------------------
  std::unordered_map<uint64_t, size_t> done_of; // op seq -> index of its done record
  for (size_t i = 0; i < n; ++i)
    if (is_done(t[i]))
      done_of[t[i].getPayload().getDeviceOp().getOpSeq()] = i;
  std::map<uint8_t, double> stream_end;
  std::unordered_map<uint64_t, std::pair<std::string, double>> event_records; // event id -> lane, ts
  std::unordered_map<uint64_t, double> event_ready;                           // event id -> when it fires
  for (size_t i = 0; i < n; ++i) {
    auto r = t[i];
    if (!r.getPayload().isDeviceOp() || is_done(r))
      continue;
    auto d = r.getPayload().getDeviceOp();
    std::string lane = stream_lane(d.getStream());
    double ts = tl.ts(r);
    json args = {{"step", tl.step(r)}, {"seq", r.getSeq()}};
    if (d.getRequestId())
      args["request"] = d.getRequestId();
    if (d.getUnitsRead().size())
      args["units_read"] = short_list(d.getUnitsRead());
    if (d.getUnitsWritten().size())
      args["units_written"] = short_list(d.getUnitsWritten());
    if (d.getSlotsRead().size())
      args["slots_read"] = short_list(d.getSlotsRead());
    if (d.getSlotsWritten().size())
      args["slots_written"] = short_list(d.getSlotsWritten());
    if (d.getDataBytes())
      args["bytes"] = d.getDataBytes();
    if (d.getOp() == wire::DeviceOpKind::LOAD || d.getOp() == wire::DeviceOpKind::SAVE)
      args["object"] = d.getObjectKind() == 0 ? "kv" : "img";
    if (d.getTokens())
      args["tokens"] = d.getTokens();
    auto op = d.getOp();
    if (op == wire::DeviceOpKind::EVENT_RECORD || op == wire::DeviceOpKind::EVENT_WAIT) {
      args["event"] = d.getEventId();
      if (op == wire::DeviceOpKind::EVENT_RECORD) {
        event_records[d.getEventId()] = {lane, ts};
        // the event fires when the work enqueued before it on its stream has completed
        event_ready[d.getEventId()] = stream_end.count(d.getStream()) ? stream_end[d.getStream()] : ts;
      } else {
        auto it = event_records.find(d.getEventId());
        if (it != event_records.end())
          tl.flow("event", "event " + std::to_string(d.getEventId()), r.getSeq(), it->second.first,
                  it->second.second, lane, ts);
        // work enqueued after the wait starts no earlier than the event fires
        auto ready = event_ready.find(d.getEventId());
        if (ready != event_ready.end())
          stream_end[d.getStream()] = std::max(stream_end.count(d.getStream()) ? stream_end[d.getStream()] : 0.0,
                                               ready->second);
      }
    }
    auto it = done_of.find(r.getSeq());
    if (it == done_of.end()) { // event_record, event_wait, complete; or an op the file lost the end of
      auto e = tl.event("i", r.getKind().cStr(), lane, ts);
      e["s"] = "t";
      e["cat"] = "device";
      e["args"] = std::move(args);
      ev.push_back(std::move(e));
      continue;
    }
    double start = std::max(ts, stream_end.count(d.getStream()) ? stream_end[d.getStream()] : ts);
    double end = std::max(start, tl.ts(t[it->second]));
    stream_end[d.getStream()] = end;
    args["queued_us"] = start - ts;
    auto e = tl.event("X", r.getKind().cStr(), lane, start);
    e["dur"] = end - start;
    e["cat"] = "device";
    e["args"] = std::move(args);
    ev.push_back(std::move(e));
  }

  // --- handler slices ---------------------------------------------------------------------------
  std::map<std::string, std::vector<size_t>> by_actor; // an actor's records, device `done`s left out
  for (size_t i = 0; i < n; ++i)
    if (!is_done(t[i]))
      by_actor[t[i].getActor().cStr()].push_back(i);
  std::vector<bool> covered(n, false); // records inside a handler slice
  for (auto& [actor, idx] : by_actor) {
    for (size_t k = 0; k < idx.size(); ++k) {
      auto r = t[idx[k]];
      if (r.getDirection() != wire::TraceDirection::IN)
        continue;
      double start = tl.ts(r), last = start;
      size_t j = k + 1;
      for (; j < idx.size() && t[idx[j]].getDirection() != wire::TraceDirection::IN; ++j) {
        double ts = tl.ts(t[idx[j]]);
        if (ts - start > handler_cap_us)
          break;
        last = ts;
        covered[idx[j]] = true;
      }
      covered[idx[k]] = true;
      double end = last + handler_tail_us;
      if (j < idx.size() && t[idx[j]].getDirection() == wire::TraceDirection::IN)
        end = std::min(end, std::max(last, tl.ts(t[idx[j]]))); // never overlaps the next handler
      auto e = tl.event("X", r.getKind().cStr(), actor, start);
      e["dur"] = std::max(0.0, end - start);
      e["cat"] = "handler";
      e["args"] = {{"step", tl.step(r)}, {"seq", r.getSeq()}, {"from", r.getPeer().cStr()},
                   {"summary", trace_text::summary(r).substr(0, 300)}};
      ev.push_back(std::move(e));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    auto r = t[i];
    if (covered[i] || r.getDirection() != wire::TraceDirection::OUT)
      continue;
    auto e = tl.event("X", r.getKind().cStr(), r.getActor().cStr(), tl.ts(r));
    e["dur"] = lone_send_us;
    e["cat"] = "send";
    e["args"] = {{"step", tl.step(r)}, {"seq", r.getSeq()}, {"to", r.getPeer().cStr()},
                 {"summary", trace_text::summary(r).substr(0, 300)}};
    ev.push_back(std::move(e));
  }

  // --- message flows ------------------------------------------------------------------------------
  // (sender, receiver, kind) -> the sender's outs not yet matched, in order
  std::map<std::tuple<std::string, std::string, std::string>, std::deque<size_t>> pending;
  for (size_t i = 0; i < n; ++i) {
    auto r = t[i];
    std::string actor = r.getActor().cStr(), peer = r.getPeer().cStr(), kind = r.getKind().cStr();
    if (r.getDirection() == wire::TraceDirection::OUT) {
      pending[{actor, peer, kind}].push_back(i);
    } else if (r.getDirection() == wire::TraceDirection::IN) {
      auto it = pending.find({peer, actor, kind});
      if (it == pending.end() || it->second.empty())
        continue;
      auto from = t[it->second.front()];
      it->second.pop_front();
      tl.flow("msg", kind, from.getSeq(), peer, tl.ts(from), actor, tl.ts(r));
    }
  }

  // --- counters: what each step plans ---------------------------------------------------------------
  for (size_t i = 0; i < n; ++i) {
    auto r = t[i];
    if (!r.getPayload().isStepPlan() || r.getDirection() != wire::TraceDirection::OUT)
      continue;
    auto p = r.getPayload().getStepPlan();
    int64_t tokens = 0;
    for (auto q : p.getRequests())
      tokens += q.getTokenIds().size();
    auto e = tl.event("C", "step_plan", r.getActor().cStr(), tl.ts(r));
    e["args"] = {{"requests", p.getRequests().size()}, {"tokens", tokens}, {"loads", p.getLoads().size()},
                 {"saves", p.getSaves().size()}};
    ev.push_back(std::move(e));
  }
}

// Perfetto wants the `X` slices of one thread properly nested: a slice that starts inside another
// and would end after it is cut at the other's end.
void nest_slices(json& events) {
  std::map<std::pair<int, int>, std::vector<json*>> lanes;
  for (auto& e : events)
    if (e["ph"] == "X")
      lanes[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(&e);
  for (auto& [lane, xs] : lanes) {
    std::stable_sort(xs.begin(), xs.end(), [](json* a, json* b) {
      double ta = (*a)["ts"].get<double>(), tb = (*b)["ts"].get<double>();
      return ta != tb ? ta < tb : (*a)["dur"].get<double>() > (*b)["dur"].get<double>();
    });
    std::vector<double> open_ends;
    for (json* e : xs) {
      double ts = (*e)["ts"].get<double>(), end = ts + (*e)["dur"].get<double>();
      while (!open_ends.empty() && open_ends.back() <= ts)
        open_ends.pop_back();
      if (!open_ends.empty() && end > open_ends.back()) {
        end = open_ends.back();
        (*e)["dur"] = end - ts;
      }
      open_ends.push_back(end);
    }
  }
}

} // namespace

int run_trace_timeline(const std::vector<std::string>& paths, const std::string& out_path) {
  std::vector<trace_contents> files;
  for (auto& path : paths) {
    try {
      files.push_back(read_trace(path));
    } catch (const std::exception& e) {
      std::string why = e.what(); // names the path already when it comes from trace_reader
      std::cerr << "ordo trace timeline: " << (why.rfind(path, 0) == 0 ? why : "cannot read " + path + ": " + why) << "\n";
      return 2;
    }
    if (files.back().truncated)
      std::cerr << "ordo trace timeline: " << path << ": file " << files.back().truncation
                << "; using the records before the cut\n";
  }
  uint64_t base_ms = UINT64_MAX;
  for (auto& f : files)
    base_ms = std::min<uint64_t>(base_ms, f.header().getStartUnixMs());

  node_flows cross;
  try {
    cross = match_node_flows(files);
  } catch (const kj::Exception& e) {
    std::cerr << "ordo trace timeline: a record does not decode: " << e.getDescription().cStr() << "\n";
    return 2;
  }
  for (auto& why : cross.refusals)
    std::cerr << "ordo trace timeline: " << why << "\n";

  json events = json::array();
  std::string nodes;
  std::vector<file_timeline> tls(files.size());
  for (size_t k = 0; k < files.size(); ++k) {
    auto& f = files[k];
    file_timeline& tl = tls[k];
    tl.pid = static_cast<int>(k + 1);
    tl.offset_us = static_cast<double>(f.header().getStartUnixMs() - base_ms) * 1000.0 + cross.shift_us[k];
    tl.events = &events;
    nodes += (k ? ", " : "") + std::string(f.header().getNode().cStr());
    try {
      add_file(f, tl);
    } catch (const kj::Exception& e) {
      std::cerr << "ordo trace timeline: " << paths[k] << ": a record does not decode: " << e.getDescription().cStr()
                << "\n";
      return 2;
    }
  }
  for (const auto& flow : cross.flows) {
    auto end = [&](const char* ph, const node_flow_end& at) {
      file_timeline& tl = tls[at.file];
      auto e = tl.event(ph, flow.name, at.lane, tl.offset_us + static_cast<double>(at.ts_ns) / 1000.0);
      e["cat"] = "pd";
      e["id"] = flow.id;
      return e;
    };
    events.push_back(end("s", flow.from));
    auto f = end("f", flow.to);
    f["bp"] = "e";
    events.push_back(std::move(f));
  }
  for (size_t k = 0; k < files.size(); ++k) {
    file_timeline& tl = tls[k];
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", tl.pid}, {"tid", 0}, {"ts", 0},
                      {"args", {{"name", files[k].header().getNode().cStr()}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", tl.pid}, {"tid", 0}, {"ts", 0},
                      {"args", {{"sort_index", tl.pid}}}});
    for (auto& [lane, tid] : tl.tids) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", tl.pid}, {"tid", tid}, {"ts", 0},
                        {"args", {{"name", lane}}}});
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", tl.pid}, {"tid", tid}, {"ts", 0},
                        {"args", {{"sort_index", tid}}}});
    }
  }

  nest_slices(events);
  size_t count = events.size();
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (out)
    out << doc.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  out.flush();
  if (!out) {
    std::cerr << "ordo trace timeline: cannot write " << out_path << "\n";
    return 2;
  }
  std::cout << "wrote " << out_path << ": " << count << " events from " << files.size() << " file"
            << (files.size() == 1 ? "" : "s") << " (nodes: " << nodes << ")" << std::endl;
  std::string links;
  for (auto& l : cross.links)
    links += (links.empty() ? " (" : "; ") + l;
  std::cout << "flows between nodes: " << cross.flows.size() << links << (links.empty() ? "" : "; a request and its answer each)")
            << std::endl;
  for (size_t k = 0; k < files.size(); ++k)
    if (cross.shift_us[k] != 0.0) {
      char ms[32];
      std::snprintf(ms, sizeof ms, "%+.3f", cross.shift_us[k] / 1000.0);
      std::cout << "clock: " << files[k].header().getNode().cStr() << " moved by " << ms
                << " ms so that its flows point forward (start stamps are whole milliseconds)" << std::endl;
    }
  return 0;
}

} // namespace ordo
