// `ordo trace show FILE [--actor A] [--step N]` (docs/traces.md): a header line, then one
// readable line per record: `seq  +ms  step e.s  actor  dir  peer  kind  summary`. The summary
// (trace_record_summary, also used by `ordo trace timeline`) shows the fields that matter,
// compactly: lists are shortened (`units 3,4,5 (+12)`), object keys are hex hashes.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_map>

#include "messages/trace/trace_file.hpp"
#include "tools/trace/trace_tools.hpp"

namespace ordo {
namespace trace_text {

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// "3,4,5 (+12)": the first `shown` elements, then how many more.
template <class List>
std::string list(List l, size_t shown = 3) {
  std::string s;
  size_t n = l.size();
  for (size_t i = 0; i < n && i < shown; ++i) {
    if (i)
      s += ',';
    s += std::to_string(l[i]);
  }
  if (n > shown)
    s += " (+" + std::to_string(n - shown) + ")";
  if (n == 0)
    s = "-";
  return s;
}

const char* object_kind_name(uint8_t k) { return k == 0 ? "kv" : k == 1 ? "img" : "obj"; }

std::string key(wire::ObjectKey::Reader k) { return std::string(object_kind_name(k.getKind())) + ":" + hex(k.getHash()); }

const char* stream_name(uint8_t s) { return s == 0 ? "compute" : s == 1 ? "load" : s == 2 ? "save" : "stream?"; }

// Each element of `l` rendered by `f`, the first `shown` of them, then how many more.
template <class List, class F>
std::string each(List l, F f, size_t shown = 2) {
  std::string s = "[";
  size_t n = l.size();
  for (size_t i = 0; i < n && i < shown; ++i) {
    if (i)
      s += "; ";
    s += f(l[i]);
  }
  if (n > shown)
    s += "; +" + std::to_string(n - shown);
  return s + "]";
}

struct line {
  std::string s;
  line& add(const std::string& t) {
    if (!t.empty()) {
      if (!s.empty())
        s += ' ';
      s += t;
    }
    return *this;
  }
  template <class T>
  line& kv(const char* name, const T& v) {
    std::ostringstream o;
    o << name << ' ' << v;
    return add(o.str());
  }
  // "name N [first; second; +K]" when the list is not empty.
  template <class List, class F>
  line& items(const char* name, List l, F f, size_t shown = 2) {
    if (l.size() == 0)
      return *this;
    return add(std::string(name) + " " + std::to_string(l.size()) + " " + each(l, f, shown));
  }
};

std::string grant(uint64_t request_id, wire::ObjectKey::Reader k, bool ok, capnp::Text::Reader status,
                  uint64_t offset, uint64_t bytes) {
  std::string s = (request_id ? "req " + std::to_string(request_id) + " " : std::string()) + key(k);
  s += ok ? " ok" : " FAIL";
  if (status.size() && std::string(status.cStr()) != "ok")
    s += std::string(" ") + status.cStr();
  if (ok && bytes)
    s += " @" + std::to_string(offset) + "+" + std::to_string(bytes);
  return s;
}

std::string object_ref(wire::ObjectRef::Reader r) {
  return key(r.getKey()) + " tok " + std::to_string(r.getFirstToken()) + "+" + std::to_string(r.getTokens()) +
         " blocks " + std::to_string(r.getNumBlocks());
}

std::string image(wire::StateImageCopy::Reader c) {
  return "req " + std::to_string(c.getRequestId()) + " slot " + std::to_string(c.getStateSlot()) + " pos " +
         std::to_string(c.getPosition()) + " units " + list(c.getUnits());
}

std::string transfer(wire::UnitTransfer::Reader t) {
  return "req " + std::to_string(t.getRequestId()) + " " + object_kind_name(t.getKind()) + " units " +
         list(t.getUnits()) + " @" + std::to_string(t.getDataOffset()) + "+" + std::to_string(t.getDataBytes());
}

std::string stats(wire::StoreStats::Reader s) {
  return "objects " + std::to_string(s.getNumObjects()) + " bytes " + std::to_string(s.getBytesUsed()) + "/" +
         std::to_string(s.getBytesCapacity());
}

std::string device_op(wire::DeviceOp::Reader d) {
  line l;
  l.kv("stream", stream_name(d.getStream()));
  auto op = d.getOp();
  if (op == wire::DeviceOpKind::DONE)
    return l.kv("op", "#" + std::to_string(d.getOpSeq())).s;
  if (op == wire::DeviceOpKind::EVENT_RECORD || op == wire::DeviceOpKind::EVENT_WAIT)
    l.kv("event", d.getEventId());
  if (d.getRequestId())
    l.kv("req", d.getRequestId());
  if (d.getTokens())
    l.kv("tokens", d.getTokens());
  if (d.getUnitsRead().size())
    l.kv("units-r", list(d.getUnitsRead()));
  if (d.getUnitsWritten().size())
    l.kv("units-w", list(d.getUnitsWritten()));
  if (d.getSlotsRead().size())
    l.kv("slots-r", list(d.getSlotsRead()));
  if (d.getSlotsWritten().size())
    l.kv("slots-w", list(d.getSlotsWritten()));
  if (op == wire::DeviceOpKind::LOAD || op == wire::DeviceOpKind::SAVE)
    l.add(object_kind_name(d.getObjectKind()));
  if (d.getDataBytes())
    l.add("@" + std::to_string(d.getDataOffset()) + "+" + std::to_string(d.getDataBytes()));
  if (d.getReadsInputs())
    l.add("reads-inputs");
  if (d.getWritesInputs())
    l.add("writes-inputs");
  return l.s;
}

using payload = wire::TraceRecord::Payload;

// What the summary shows of each payload kind, one entry per kind (`summary` looks the record's
// kind up; a kind missing here is one of a newer schema).
struct payload_summary {
  payload::Which kind;
  void (*write)(payload::Reader p, line& l);
};

const payload_summary payload_summaries[] = {
    {payload::NONE, [](payload::Reader, line&) {}},
    {payload::HEADER, [](payload::Reader p, line& l) { l.kv("node", p.getHeader().getNode().cStr()); }},
    {payload::DEVICE_OP, [](payload::Reader p, line& l) { l.s = device_op(p.getDeviceOp()); }},
    {payload::STORE_VERDICT, [](payload::Reader p, line& l) {
      l.add(key(p.getStoreVerdict().getKey())).add(p.getStoreVerdict().getStatus().cStr());
    }},
    {payload::ERROR, [](payload::Reader p, line& l) { l.add(p.getError().cStr()); }},
    {payload::COMPLETION_REQUEST, [](payload::Reader p, line& l) {
      auto m = p.getCompletionRequest();
      l.kv("req", m.getRequestId()).kv("prompt", m.getPrompt().size()).kv("max", m.getMaxTokens());
      if (m.getTemperature() != 0)
        l.kv("temp", m.getTemperature()).kv("seed", m.getSeed());
      if (m.getStream())
        l.add("stream");
      if (m.getCacheSalt().size())
        l.add("salted");
      if (m.getMedia().size())
        l.kv("media", m.getMedia().size());
      if (m.getStop().size())
        l.kv("stops", m.getStop().size());
    }},
    {payload::COMPLETION_CHUNK, [](payload::Reader p, line& l) {
      auto m = p.getCompletionChunk();
      l.kv("req", m.getRequestId()).kv("#", m.getIndex()).kv("token", m.getTokenId());
    }},
    {payload::COMPLETION_RESULT, [](payload::Reader p, line& l) {
      auto m = p.getCompletionResult();
      l.kv("req", m.getRequestId()).kv("tokens", m.getTokenIds().size()).kv("finish", m.getFinishReason().cStr());
      l.kv("prompt", m.getPromptTokens()).kv("cached", m.getCachedTokens());
      l.add("(hbm " + std::to_string(m.getFromHbm()) + " cpu " + std::to_string(m.getFromCpu()) + " store " +
            std::to_string(m.getFromStore()) + ")");
      l.kv("resume", m.getResumeAt());
      if (m.getNumPreemptions())
        l.kv("preempted", m.getNumPreemptions());
      l.kv("digest", hex(m.getLogitsDigest()));
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.1fms", m.getDurationMs());
      l.add(ms);
    }},
    {payload::COMPLETION_FAILED, [](payload::Reader p, line& l) {
      auto m = p.getCompletionFailed();
      l.kv("req", m.getRequestId()).add(std::string(m.getType().cStr()) + ": " + m.getMessage().cStr());
    }},
    {payload::CANCEL_REQUEST, [](payload::Reader p, line& l) { l.kv("req", p.getCancelRequest().getRequestId()); }},
    {payload::EVICT_REQUEST, [](payload::Reader p, line& l) {
      l.kv("tier", p.getEvictRequest().getTier().cStr());
      if (p.getEvictRequest().getRequestId())
        l.kv("req", p.getEvictRequest().getRequestId());
    }},
    {payload::EVICT_RESULT, [](payload::Reader p, line& l) {
      l.kv("tier", p.getEvictResult().getTier().cStr()).kv("blocks", p.getEvictResult().getNumBlocks());
    }},
    {payload::STEP_PLAN, [](payload::Reader p, line& l) {
      auto m = p.getStepPlan();
      l.items("reqs", m.getRequests(), [](wire::ScheduledRequest::Reader q) {
        return std::to_string(q.getRequestId()) + " +" + std::to_string(q.getTokenIds().size()) + "@" +
               std::to_string(q.getFirstPosition()) + (q.getSample() ? " sample" : "") +
               (q.getResetState() ? " reset" : "");
      }, 3);
      if (m.getClears().size())
        l.kv("clears", list(m.getClears()));
      l.items("restores", m.getRestores(), image, 1);
      l.items("ckpts", m.getCheckpointCopies(), image, 1);
      l.items("loads", m.getLoads(), transfer, 1);
      l.items("saves", m.getSaves(), transfer, 1);
    }},
    {payload::STEP_DONE, [](payload::Reader p, line& l) {
      auto m = p.getStepDone();
      l.items("samples", m.getSamples(), [](wire::SampledToken::Reader s) {
        return std::to_string(s.getRequestId()) + "@" + std::to_string(s.getPosition()) + "=" +
               std::to_string(s.getTokenId());
      }, 3);
      char ms[32];
      std::snprintf(ms, sizeof ms, "device %.2fms", m.getDeviceMs());
      l.add(ms);
    }},
    {payload::POOL_STEP, [](payload::Reader p, line& l) {
      auto m = p.getPoolStep();
      if (m.getReleases().size())
        l.kv("releases", list(m.getReleases()));
      l.items("commits", m.getCommits(), [](wire::BlockCommit::Reader c) {
        return std::to_string(c.getRequestId()) + "#" + std::to_string(c.getBlockIndex());
      }, 3);
      l.items("grows", m.getGrows(), [](wire::BlockGrow::Reader g) {
        return "req " + std::to_string(g.getRequestId()) + " blocks " + std::to_string(g.getTotalBlocks()) +
               " hashes " + std::to_string(g.getHashes().size()) + (g.getNeedsState() ? " state" : "");
      });
      l.items("ready", m.getImagesReady(), [](uint64_t h) { return "img:" + hex(h); }, 1);
      l.items("unpins", m.getUnpins(), [](wire::ImageUnpin::Reader u) { return std::to_string(u.getRequestId()) + " img:" + hex(u.getHash()); }, 1);
      l.items("aborts", m.getImageAborts(), [](wire::ImageUnpin::Reader u) { return std::to_string(u.getRequestId()) + " img:" + hex(u.getHash()); }, 1);
      if (m.getEvictHbm())
        l.add("evict-hbm");
      if (l.s.empty())
        l.add("(empty)");
    }},
    {payload::POOL_STEP_DONE, [](payload::Reader p, line& l) {
      auto m = p.getPoolStepDone();
      l.items("results", m.getResults(), [](wire::GrowResult::Reader g) {
        std::string s = "req " + std::to_string(g.getRequestId()) + (g.getOk() ? " ok" : " NO");
        if (g.getOk()) {
          s += " hit " + std::to_string(g.getNumHitBlocks()) + " table " + list(g.getBlockTable());
          if (g.getRestoreHash())
            s += " restore img:" + hex(g.getRestoreHash());
          if (g.getLoadUnits().size())
            s += " load " + list(g.getLoadUnits());
        }
        return s;
      });
      l.kv("free", m.getNumFree()).kv("cached", m.getNumCached()).kv("avail", m.getNumAvailable());
      if (m.getNumEvicted())
        l.kv("evicted", m.getNumEvicted());
      if (m.getClears().size())
        l.kv("clears", list(m.getClears()));
    }},
    {payload::CONNECTOR_LOOKUP, [](payload::Reader p, line& l) {
      auto m = p.getConnectorLookup();
      l.kv("req", m.getRequestId()).kv("hashes", m.getHashes().size()).kv("prompt", m.getNumPromptTokens());
    }},
    {payload::CONNECTOR_LOOKUP_DONE, [](payload::Reader p, line& l) {
      auto m = p.getConnectorLookupDone();
      l.kv("req", m.getRequestId()).kv("cpu", m.getCpuTokens()).kv("store", m.getStoreTokens());
      if (m.getConnector().size())
        l.kv("via", m.getConnector().cStr());
      if (m.getCpuChunks().size())
        l.kv("chunks", m.getCpuChunks().size());
      if (m.getCpuStatePositions().size())
        l.kv("states", list(m.getCpuStatePositions()));
    }},
    {payload::CONNECTOR_STEP, [](payload::Reader p, line& l) {
      auto m = p.getConnectorStep();
      auto order = [](wire::TransferOrder::Reader o) { return "req " + std::to_string(o.getRequestId()) + " " + object_ref(o.getObject()); };
      l.items("finished", m.getFinished(), [](wire::TransferResult::Reader t) {
        return "req " + std::to_string(t.getRequestId()) + " " + key(t.getKey()) + (t.getIsSave() ? " save" : " load") +
               (t.getOk() ? " ok" : " FAIL");
      }, 1);
      l.items("loads", m.getLoads(), order, 1);
      l.items("saves", m.getSaves(), order, 1);
      l.items("leases", m.getLeases(), [](wire::LeaseOrder::Reader o) { return "req " + std::to_string(o.getRequestId()); }, 2);
      if (m.getEvictAll())
        l.add("evict-all");
      if (l.s.empty())
        l.add("(empty)");
    }},
    {payload::CONNECTOR_STEP_DONE, [](payload::Reader p, line& l) {
      auto m = p.getConnectorStepDone();
      auto g = [](wire::TransferGrant::Reader t) {
        return grant(t.getRequestId(), t.getKey(), t.getOk(), t.getStatus(), t.getDataOffset(), t.getDataBytes());
      };
      l.items("loads", m.getLoads(), g, 1);
      l.items("saves", m.getSaves(), g, 1);
      l.items("leases", m.getLeases(), [](wire::LeaseGrant::Reader o) {
        return "req " + std::to_string(o.getRequestId()) + " " + std::to_string(o.getNumObjects()) + " objects";
      }, 2);
      l.add(stats(m.getStats()));
      if (m.getNumEvicted())
        l.kv("evicted", m.getNumEvicted());
    }},
    {payload::STORE_CONTAINS, [](payload::Reader p, line& l) {
      l.items("keys", p.getStoreContains().getKeys(), key, 2);
    }},
    {payload::STORE_CONTAINS_DONE, [](payload::Reader p, line& l) {
      l.kv("leading", p.getStoreContainsDone().getNumLeadingCommitted())
          .kv("present", list(p.getStoreContainsDone().getPresent(), 8));
    }},
    {payload::STORE_STEP, [](payload::Reader p, line& l) {
      auto m = p.getStoreStep();
      l.items("commits", m.getCommits(), key, 1);
      l.items("aborts", m.getAborts(), key, 1);
      l.items("unpins", m.getUnpins(), key, 1);
      l.items("pins", m.getPins(), object_ref, 1);
      l.items("reserves", m.getReserves(), object_ref, 1);
      l.items("leases", m.getLeases(), [](wire::StoreLease::Reader o) {
        return std::string(o.getTransferId().cStr()) + " " + std::to_string(o.getKeys().size()) + " keys " +
               std::to_string(o.getLeaseMs()) + " ms";
      }, 2);
      l.items("releases", m.getReleases(), [](capnp::Text::Reader t) { return std::string(t.cStr()); }, 2);
      if (m.getEvictAll())
        l.add("evict-all");
      if (l.s.empty())
        l.add("(empty)");
    }},
    {payload::STORE_STEP_DONE, [](payload::Reader p, line& l) {
      auto m = p.getStoreStepDone();
      auto g = [](wire::StoreGrant::Reader t) {
        return grant(0, t.getKey(), t.getOk(), t.getStatus(), t.getDataOffset(), t.getDataBytes());
      };
      l.items("pins", m.getPins(), g, 1);
      l.items("reserves", m.getReserves(), g, 1);
      l.items("leased", m.getLeased(), [](int32_t n) { return std::to_string(n); }, 4);
      l.add(stats(m.getStats()));
      if (m.getNumEvicted())
        l.kv("evicted", m.getNumEvicted());
    }},
    {payload::STORE_HELLO, [](payload::Reader p, line& l) {
      auto m = p.getStoreHello();
      l.kv("engine", m.getEngineId().cStr()).kv("ns", hex(m.getNamespaceId())).kv("wire", hex(m.getWireDigest()));
    }},
    {payload::STORE_WELCOME, [](payload::Reader p, line& l) {
      auto m = p.getStoreWelcome();
      if (m.getOk())
        l.add("ok").kv("store", m.getStoreId().cStr()).kv("arena", m.getArenaBytes()).kv("granularity",
                                                                                        m.getGranularity().cStr());
      else
        l.add("REFUSED").add(m.getWhy().cStr());
    }},
    {payload::STORE_CORRUPT, [](payload::Reader p, line& l) {
      l.kv("kind", object_kind_name(p.getStoreCorrupt().getKind()));
    }},
};

} // namespace

// A compact one-line summary of a record's payload (no newlines).
std::string summary(wire::TraceRecord::Reader r) {
  auto p = r.getPayload();
  line l;
  const auto* entry = std::find_if(std::begin(payload_summaries), std::end(payload_summaries),
                                   [&](const payload_summary& e) { return e.kind == p.which(); });
  if (entry != std::end(payload_summaries))
    entry->write(p, l);
  else
    l.add("(payload of a newer schema)");
  for (auto& c : l.s)
    if (c == '\n' || c == '\t')
      c = ' ';
  return l.s;
}

const char* direction_name(wire::TraceDirection d) {
  switch (d) {
  case wire::TraceDirection::IN: return "in";
  case wire::TraceDirection::OUT: return "out";
  case wire::TraceDirection::LOCAL: return "local";
  }
  return "?";
}

std::string header_line(const std::string& path, wire::TraceHeader::Reader h) {
  std::string s = "trace " + path + ": node " + h.getNode().cStr() + ", ordo " + h.getOrdoVersion().cStr() +
                  ", schema " + std::to_string(h.getSchemaVersion()) + ", namespace " + hex(h.getNamespaceId()) +
                  ", chaos seed " + std::to_string(h.getChaosSeed());
  if (h.getDropEdge().size())
    s += std::string(", drop_edge ") + h.getDropEdge().cStr();
  s += ", config " + hex(h.getConfigDigest());
  std::time_t start = static_cast<std::time_t>(h.getStartUnixMs() / 1000);
  char when[40];
  std::tm tm{};
  if (gmtime_r(&start, &tm) && std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm)) {
    char ms[8];
    std::snprintf(ms, sizeof ms, ".%03dZ", static_cast<int>(h.getStartUnixMs() % 1000));
    s += std::string(", started ") + when + ms;
  }
  return s;
}

} // namespace trace_text

int run_trace_show(const trace_show_options& options) {
  std::unique_ptr<trace_reader> reader;
  try {
    reader = std::make_unique<trace_reader>(options.path);
  } catch (const std::exception& e) {
    std::string why = e.what(); // names the path already when it comes from trace_reader
    std::cerr << "ordo trace show: " << (why.rfind(options.path, 0) == 0 ? why : "cannot read " + options.path + ": " + why)
              << "\n";
    return 2;
  }
  std::ostream& out = std::cout;
  try {
    out << trace_text::header_line(options.path, reader->header()) << "\n";
    // device op seq -> kind, so a `done` line names what completed
    std::unordered_map<uint64_t, std::string> op_kinds;
    constexpr size_t max_summary = 170;
    while (reader->next()) {
      auto r = reader->record();
      bool is_op = r.getPayload().isDeviceOp();
      if (is_op && r.getPayload().getDeviceOp().getOp() != wire::DeviceOpKind::DONE)
        op_kinds[r.getSeq()] = r.getKind().cStr();
      if (!options.actor.empty() && options.actor != r.getActor().cStr())
        continue;
      if (options.step >= 0 && r.getStepSeq() != static_cast<uint64_t>(options.step))
        continue;
      std::string summary = trace_text::summary(r);
      if (is_op && r.getPayload().getDeviceOp().getOp() == wire::DeviceOpKind::DONE) {
        auto it = op_kinds.find(r.getPayload().getDeviceOp().getOpSeq());
        if (it != op_kinds.end())
          summary += " (" + it->second + ")";
      }
      if (summary.size() > max_summary)
        summary = summary.substr(0, max_summary - 3) + "...";
      char head[160];
      std::snprintf(head, sizeof head, "%7" PRIu64 " %+11.3f  step %" PRIu64 ".%-4" PRIu64 " %-12s %-5s %-12s %-21s ",
                    r.getSeq(), static_cast<double>(r.getTsNs()) / 1e6, r.getStepEpoch(), r.getStepSeq(),
                    r.getActor().cStr(), trace_text::direction_name(r.getDirection()),
                    r.getPeer().size() ? r.getPeer().cStr() : "-", r.getKind().cStr());
      out << head << summary << "\n";
    }
  } catch (const kj::Exception& e) { // before std::exception: its what() carries a stack trace
    out.flush();
    std::cerr << "ordo trace show: " << options.path << ": record " << reader->count()
              << " does not decode: " << e.getDescription().cStr() << "\n";
    return 2;
  } catch (const std::exception& e) { // a damaged record: the reader names the file, record and byte
    out.flush();
    std::cerr << "ordo trace show: " << e.what() << "\n";
    return 2;
  }
  if (reader->truncated()) {
    // truncation() reads "cut short after record K (why)"
    std::string t = reader->truncation();
    auto open = t.find(" (");
    std::string why = open == std::string::npos ? t : t.substr(open + 2, t.size() - open - 3);
    out << "(file cut short after record " << reader->count() << ": " << why << ")\n";
  }
  out.flush();
  return 0;
}

} // namespace ordo
