#include "messages/trace/trace_check.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

namespace ordo {

namespace {

using payload_which = wire::TraceRecord::Payload::Which;
using op_kind = wire::DeviceOpKind;

constexpr int64_t none = -1;

struct step_key {
  uint64_t epoch = 0, seq = 0;
  bool operator<(const step_key& o) const { return std::tie(epoch, seq) < std::tie(o.epoch, o.seq); }
};

using object_id = std::tuple<uint64_t, uint64_t, uint8_t>; // namespace, hash, kind

enum class res_type : uint8_t { unit, slot, inputs, host_object };
using res_key = std::pair<res_type, uint64_t>;

struct res_state {
  int64_t writer = none;
  std::vector<int64_t> readers; // since the writer; none of them happens before another
};

const char* stream_name(uint64_t s) {
  switch (s) {
  case 0: return "compute stream";
  case 1: return "load stream";
  case 2: return "save stream";
  default: return nullptr;
  }
}

std::string advice_for(const std::string& rule) {
  if (rule == "clear_before_load")
    return "advice: the load stream must wait for an event recorded on compute after the step's clears "
           "(DESIGN §2.1)";
  if (rule == "load_before_use")
    return "advice: compute must wait for the load stream's event recorded after the loads before anything "
           "reads or rewrites the loaded units (DESIGN §2.1)";
  if (rule == "produce_before_save")
    return "advice: the save stream must wait for an event recorded on compute after the forward and the "
           "checkpoint copies (DESIGN §2.1)";
  if (rule == "upload_before_compute")
    return "advice: compute must wait for the upload's event before it reads the step inputs (DESIGN §2.1)";
  if (rule == "transfer_before_reuse")
    return "advice: what a load or save reads must not be rewritten before the transfer is joined back into "
           "compute (DESIGN §2.1)";
  if (rule == "commit_after_save")
    return "advice: the store may commit an object only after the step whose save wrote its data completed "
           "(step_done reached the connector)";
  if (rule == "ready_after_step")
    return "advice: an image may turn READY only after the step whose checkpoint copy wrote it completed";
  if (rule == "seq_contiguous")
    return "advice: the commands of one channel must carry consecutive (epoch, seq): one was lost, "
           "duplicated or reordered";
  return "advice: two device operations on one resource are ordered neither by a stream, an event nor a "
         "message chain";
}

class checker {
public:
  explicit checker(const trace_contents& t) : t_(t), n_(t.size()) {}

  trace_check_result run() {
    result_.records = n_;
    result_.truncated = t_.truncated;
    result_.truncation = t_.truncation;
    result_.last_seq = n_ ? t_[n_ - 1].getSeq() : 0;
    assign_lanes();
    vc_.assign(n_ * lanes_, 0);
    lane_last_.assign(lanes_, none);
    lane_count_.assign(lanes_, 0);
    std::set<step_key> steps;
    for (size_t i = 0; i < n_; ++i) {
      auto r = t_[i];
      if (lane_of_[i] < 0)
        continue;
      auto p = r.getPayload();
      if (p.which() == payload_which::DEVICE_OP) {
        steps.insert({r.getStepEpoch(), r.getStepSeq()});
        ++result_.device_ops;
        device_node(i, p.getDeviceOp());
      } else {
        actor_node(i, r);
      }
    }
    result_.steps = steps.size();
    return std::move(result_);
  }

private:
  const trace_contents& t_;
  size_t n_;
  trace_check_result result_;

  size_t lanes_ = 0;
  std::vector<std::string> lane_names_;
  std::vector<int32_t> lane_of_;
  std::set<std::string> actors_;
  std::vector<uint32_t> vc_;
  std::vector<int64_t> lane_last_;
  std::vector<uint32_t> lane_count_;

  int64_t runner_last_ = none;
  std::map<std::pair<std::string, std::string>, std::deque<int64_t>> channels_; // (sender, receiver)
  std::map<uint64_t, int64_t> event_records_;
  std::map<step_key, int64_t> completes_;
  std::map<res_key, res_state> resources_;
  std::map<object_id, std::pair<uint64_t, int64_t>> grants_; // key → (dataOffset, grant record)
  std::map<uint64_t, int64_t> last_save_;                    // dataOffset → save op
  std::map<uint64_t, std::vector<int32_t>> image_units_;     // image hash → reserved units
  std::map<int32_t, int64_t> last_checkpoint_copy_;          // unit → checkpoint copy or load op
  // (receiver, kind, sender) → in-record: one channel per sender (a store server's sessions).
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> last_command_;

  static std::string lane_key_of(wire::TraceRecord::Reader r) {
    if (r.getPayload().which() == payload_which::DEVICE_OP)
      return "\x01stream " + std::to_string(r.getPayload().getDeviceOp().getStream());
    return r.getActor().cStr();
  }

  void assign_lanes() {
    std::map<std::string, int32_t> ids;
    lane_of_.assign(n_, -1);
    for (size_t i = 0; i < n_; ++i) {
      auto r = t_[i];
      auto p = r.getPayload();
      if (p.which() == payload_which::HEADER)
        continue;
      if (p.which() == payload_which::DEVICE_OP && p.getDeviceOp().getOp() == op_kind::DONE)
        continue;
      if (p.which() != payload_which::DEVICE_OP)
        actors_.insert(r.getActor().cStr());
      std::string key = lane_key_of(r);
      auto it = ids.find(key);
      if (it == ids.end()) {
        it = ids.emplace(key, static_cast<int32_t>(lane_names_.size())).first;
        if (p.which() == payload_which::DEVICE_OP) {
          auto s = p.getDeviceOp().getStream();
          const char* name = stream_name(s);
          lane_names_.push_back(name ? name : "stream " + std::to_string(s));
        } else {
          lane_names_.push_back(key);
        }
      }
      lane_of_[i] = it->second;
    }
    lanes_ = std::max<size_t>(lane_names_.size(), 1);
  }

  uint32_t* vc(int64_t i) { return vc_.data() + static_cast<size_t>(i) * lanes_; }

  // Starts node i: program order from its lane's previous node.
  void begin(int64_t i) {
    auto lane = static_cast<size_t>(lane_of_[static_cast<size_t>(i)]);
    if (lane_last_[lane] != none)
      std::copy_n(vc(lane_last_[lane]), lanes_, vc(i));
  }
  void join(int64_t i, int64_t from) {
    if (from == none)
      return;
    uint32_t* a = vc(i);
    const uint32_t* b = vc(from);
    for (size_t l = 0; l < lanes_; ++l)
      a[l] = std::max(a[l], b[l]);
  }
  void finish(int64_t i) {
    auto lane = static_cast<size_t>(lane_of_[static_cast<size_t>(i)]);
    vc(i)[lane] = ++lane_count_[lane];
    lane_last_[lane] = i;
  }
  bool hb(int64_t a, int64_t b) {
    auto lane = static_cast<size_t>(lane_of_[static_cast<size_t>(a)]);
    return vc(a)[lane] <= vc(b)[lane];
  }

  uint64_t seq_of(int64_t i) const { return t_[static_cast<size_t>(i)].getSeq(); }

  std::string describe(int64_t i) const {
    auto r = t_[static_cast<size_t>(i)];
    std::ostringstream s;
    s << "record " << r.getSeq() << " (" << r.getKind().cStr();
    switch (r.getDirection()) {
    case wire::TraceDirection::IN: s << " from " << r.getPeer().cStr(); break;
    case wire::TraceDirection::OUT: s << " to " << r.getPeer().cStr(); break;
    default: break;
    }
    s << " on " << lane_names_[static_cast<size_t>(lane_of_[static_cast<size_t>(i)])];
    if (r.getStepEpoch() || r.getStepSeq())
      s << ", step " << r.getStepEpoch() << "." << r.getStepSeq();
    s << ")";
    return s.str();
  }

  void violate(const std::string& rule, int64_t first, int64_t second, const std::string& what) {
    if (result_.violation)
      return;
    trace_violation v;
    v.rule = rule;
    v.first_seq = first == none ? 0 : seq_of(first);
    v.second_seq = seq_of(second);
    v.detail = (first == none ? std::string("nothing") : describe(first)) + " does not happen before " +
               describe(second) + (what.empty() ? "" : ", " + what);
    v.advice = advice_for(rule);
    result_.violation = std::move(v);
  }

  void unmatched(int64_t i, const std::string& why) {
    if (result_.unmatched++ == 0)
      result_.first_unmatched = describe(i) + ": " + why;
  }

  // --- device operations --------------------------------------------------------------------

  static std::string resource_name(const res_key& k) {
    switch (k.first) {
    case res_type::unit: return "unit " + std::to_string(static_cast<int64_t>(k.second));
    case res_type::slot: return "state slot " + std::to_string(static_cast<int64_t>(k.second));
    case res_type::inputs: return "the inputs buffer";
    case res_type::host_object: return "host object at arena offset " + std::to_string(k.second);
    }
    return "";
  }

  op_kind op_of(int64_t i) const { return t_[static_cast<size_t>(i)].getPayload().getDeviceOp().getOp(); }

  static std::string rule_for(op_kind first, bool first_wrote, op_kind second, res_type res) {
    if (first_wrote) {
      if (first == op_kind::CLEAR && second == op_kind::LOAD)
        return "clear_before_load";
      if (first == op_kind::LOAD)
        return "load_before_use";
      if ((first == op_kind::FORWARD || first == op_kind::CHECKPOINT_COPY) && second == op_kind::SAVE)
        return "produce_before_save";
      if (first == op_kind::UPLOAD && res == res_type::inputs)
        return "upload_before_compute";
    } else if (first == op_kind::LOAD || first == op_kind::SAVE) {
      return "transfer_before_reuse";
    }
    return "ordered_access";
  }

  void device_node(int64_t i, wire::DeviceOp::Reader op) {
    begin(i);
    join(i, runner_last_); // the runner enqueued it while handling its latest record
    auto kind = op.getOp();
    if (kind == op_kind::EVENT_WAIT) {
      auto it = event_records_.find(op.getEventId());
      if (it != event_records_.end())
        join(i, it->second);
    }
    finish(i);
    auto r = t_[static_cast<size_t>(i)];
    step_key step{r.getStepEpoch(), r.getStepSeq()};
    switch (kind) {
    case op_kind::EVENT_RECORD: event_records_[op.getEventId()] = i; return;
    case op_kind::EVENT_WAIT: return;
    case op_kind::COMPLETE: completes_[step] = i; return;
    default: break;
    }

    // What it touches: 1 read, 2 written (3 both).
    std::map<res_key, int> touches;
    for (auto u : op.getUnitsRead())
      touches[{res_type::unit, static_cast<uint64_t>(static_cast<int64_t>(u))}] |= 1;
    for (auto u : op.getUnitsWritten())
      touches[{res_type::unit, static_cast<uint64_t>(static_cast<int64_t>(u))}] |= 2;
    for (auto s : op.getSlotsRead())
      touches[{res_type::slot, static_cast<uint64_t>(static_cast<int64_t>(s))}] |= 1;
    for (auto s : op.getSlotsWritten())
      touches[{res_type::slot, static_cast<uint64_t>(static_cast<int64_t>(s))}] |= 2;
    if (op.getReadsInputs())
      touches[{res_type::inputs, 0}] |= 1;
    if (op.getWritesInputs())
      touches[{res_type::inputs, 0}] |= 2;
    if (kind == op_kind::LOAD)
      touches[{res_type::host_object, op.getDataOffset()}] |= 1;
    if (kind == op_kind::SAVE)
      touches[{res_type::host_object, op.getDataOffset()}] |= 2;

    for (const auto& [key, how] : touches) {
      auto& st = resources_[key];
      bool writes = how & 2;
      if (st.writer != none && !hb(st.writer, i))
        violate(rule_for(op_of(st.writer), true, kind, key.first), st.writer, i, resource_name(key));
      if (writes) {
        for (auto rd : st.readers)
          if (!hb(rd, i))
            violate(rule_for(op_of(rd), false, kind, key.first), rd, i, resource_name(key));
        st.writer = i;
        st.readers.clear();
      } else {
        // A reader that happens before this one is implied by it from now on.
        st.readers.erase(std::remove_if(st.readers.begin(), st.readers.end(), [&](int64_t rd) { return hb(rd, i); }),
                         st.readers.end());
        st.readers.push_back(i);
      }
    }

    if (kind == op_kind::SAVE)
      last_save_[op.getDataOffset()] = i;
    if (kind == op_kind::CHECKPOINT_COPY || kind == op_kind::LOAD) // what fills an image's units
      for (auto u : op.getUnitsWritten())
        last_checkpoint_copy_[u] = i;
  }

  // --- actor records --------------------------------------------------------------------------

  static object_id id_of(wire::ObjectKey::Reader k) { return {k.getNamespaceId(), k.getHash(), k.getKind()}; }

  static std::string object_name(const object_id& k) {
    std::ostringstream s;
    s << "object " << std::hex << "0x" << std::get<1>(k) << std::dec << " (kind " << int(std::get<2>(k)) << ")";
    return s.str();
  }

  void actor_node(int64_t i, wire::TraceRecord::Reader r) {
    std::string actor = r.getActor().cStr(), peer = r.getPeer().cStr(), kind = r.getKind().cStr();
    auto dir = r.getDirection();
    auto p = r.getPayload();
    step_key step{r.getStepEpoch(), r.getStepSeq()};
    begin(i);
    if (dir == wire::TraceDirection::OUT) {
      channels_[{actor, peer}].push_back(i);
    } else if (dir == wire::TraceDirection::IN) {
      if (actors_.count(peer)) {
        auto& q = channels_[{peer, actor}];
        if (q.empty()) {
          unmatched(i, "no matching out-record at " + peer);
        } else {
          int64_t from = q.front();
          q.pop_front();
          std::string sent = t_[static_cast<size_t>(from)].getKind().cStr();
          if (sent != kind) {
            unmatched(i, "its matching out-record " + std::to_string(seq_of(from)) + " is a " + sent);
          } else {
            join(i, from);
            ++result_.messages_matched;
          }
        }
      } else if (peer == "device" && kind == "step_done") {
        auto it = completes_.find(step);
        if (it != completes_.end())
          join(i, it->second);
      }
    }
    finish(i);
    if (actor == "model_runner")
      runner_last_ = i;

    // seq_contiguous
    if (dir == wire::TraceDirection::IN &&
        (kind == "pool_step" || kind == "connector_step" || kind == "store_step" || kind == "step_plan")) {
      const auto channel = std::make_tuple(actor, kind, peer);
      auto found = last_command_.find(channel);
      if (found == last_command_.end()) {
        if (step.seq != 1)
          violate("seq_contiguous", none, i,
                  "the first " + kind + " at " + actor + " has seq " + std::to_string(step.seq) + ", not 1");
        last_command_[channel] = i;
      } else {
        int64_t last = found->second;
        auto prev = t_[static_cast<size_t>(last)];
        uint64_t pe = prev.getStepEpoch(), ps = prev.getStepSeq();
        bool ok = (step.epoch == pe && step.seq == ps + 1) || (step.epoch != pe && step.seq == 1);
        if (!ok && !result_.violation) {
          std::ostringstream s;
          s << "expected step " << pe << "." << ps + 1 << " or a new epoch at seq 1";
          trace_violation v;
          v.rule = "seq_contiguous";
          v.first_seq = seq_of(last);
          v.second_seq = seq_of(i);
          v.detail = describe(last) + " is followed on its channel by " + describe(i) + ": " + s.str();
          v.advice = advice_for(v.rule);
          result_.violation = std::move(v);
        }
        found->second = i;
      }
    }

    // commit_after_save: the grants of the store's reserves, then its commits.
    if (actor == "store" && dir == wire::TraceDirection::OUT && p.which() == payload_which::STORE_STEP_DONE) {
      for (auto g : p.getStoreStepDone().getReserves())
        if (g.getOk())
          grants_[id_of(g.getKey())] = {g.getDataOffset(), i};
    }
    if (actor == "store" && dir == wire::TraceDirection::IN && p.which() == payload_which::STORE_STEP) {
      for (auto k : p.getStoreStep().getCommits()) {
        auto id = id_of(k);
        auto g = grants_.find(id);
        if (g == grants_.end())
          continue; // not reserved in this trace
        auto s = last_save_.find(g->second.first);
        std::string what = object_name(id) + " at arena offset " + std::to_string(g->second.first);
        if (s == last_save_.end() || s->second < g->second.second)
          violate("commit_after_save", g->second.second, i, what + ": no save wrote it after its grant");
        else {
          ++result_.commits_checked;
          if (!hb(s->second, i))
            violate("commit_after_save", s->second, i, what);
        }
      }
    }

    // ready_after_step: the units of each reserved image, then its READY.
    if (actor == "block_pool" && dir == wire::TraceDirection::OUT && p.which() == payload_which::POOL_STEP_DONE) {
      for (auto res : p.getPoolStepDone().getResults())
        for (auto img : res.getReserved()) {
          std::vector<int32_t> units;
          for (auto u : img.getUnits())
            units.push_back(u);
          image_units_[img.getHash()] = std::move(units);
        }
    }
    if (actor == "block_pool" && dir == wire::TraceDirection::IN && p.which() == payload_which::POOL_STEP) {
      for (auto h : p.getPoolStep().getImagesReady()) {
        auto u = image_units_.find(h);
        if (u == image_units_.end() || u->second.empty())
          continue;
        auto cc = last_checkpoint_copy_.find(u->second.front());
        std::ostringstream what;
        what << "image 0x" << std::hex << h;
        if (cc == last_checkpoint_copy_.end())
          continue; // no checkpoint copy or load wrote it in this trace
        auto ccr = t_[static_cast<size_t>(cc->second)];
        auto c = completes_.find({ccr.getStepEpoch(), ccr.getStepSeq()});
        if (c == completes_.end())
          violate("ready_after_step", cc->second, i, what.str() + ": the step that wrote it has not completed");
        else {
          ++result_.images_checked;
          if (!hb(c->second, i))
            violate("ready_after_step", c->second, i, what.str());
        }
      }
    }
  }

};

} // namespace

trace_check_result check_trace(const trace_contents& trace) { return checker(trace).run(); }

std::string trace_check_result::summary() const {
  std::ostringstream s;
  if (violation) {
    s << "trace check: VIOLATION " << violation->rule << ": " << violation->detail;
    if (truncated)
      s << " (file cut short after record " << last_seq << ")";
    s << "\n" << violation->advice;
    return s.str();
  }
  s << "trace check: " << records << " records (" << messages_matched << " messages, " << device_ops
    << " device ops, " << steps << " steps): no violation";
  if (truncated)
    s << "; file cut short after record " << last_seq << ": checked up to there";
  return s.str();
}

std::string trace_check_result::warning() const {
  std::string out;
  if (unmatched)
    out += "trace check: warning: " + std::to_string(unmatched) +
           " received message(s) without a matching send (not a §2.1 violation); first: " + first_unmatched;
  return out;
}

} // namespace ordo
