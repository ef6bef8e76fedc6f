// Flows between the nodes of a merged timeline (docs/traces.md, "Flows between nodes"): a P/D
// decode node's store client ("peer:HOST:PORT") and the prefill node's store server record the
// two halves of each transfer message in their own files. This pairs them, or says why it
// cannot, and never pairs a message it cannot prove is the same one.
//
// What each side records (no record carries an id the other side also has):
//   decode file:  the client's `in` store_contains / store_step from the connector and its `out`
//                 answer; the forward to the session (header = the session's (gen, seq)) is not
//                 recorded.
//   prefill file: the store's `in` of the forwarded message from "remote-<session actor>@<node>"
//                 and its `out` answer, made in the same handler.
// So a pair is proven by content and order: the client forwards the message it took and hands
// back the answer it got (header aside; grants moved by one window offset), CAF keeps the
// client's order, and the server's store_step headers (gen, seq) give that order. Each of the
// prefill side's exchanges from one remote node must fit the client's exchanges of the same kind
// in order, with equal contents and times that agree within the start stamps' millisecond; the
// pairing is taken only when that fit is the only one (leftmost fit == rightmost fit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "messages/trace/trace_file.hpp"

namespace ordo {

// One end of an arrow: a record of one of the files.
struct node_flow_end {
  size_t file = 0;   // index into the files given
  std::string lane;  // the record's actor
  uint64_t ts_ns = 0; // its tsNs
};

struct node_flow {
  std::string name; // "pull from p: store_step" (the request), "pull from p: store_step_done" (its answer)
  uint64_t id = 0;  // unique among the flows returned
  node_flow_end from, to;
};

struct node_flows {
  std::vector<node_flow> flows;
  // Per file, microseconds added to its start on the common clock: startUnixMs has millisecond
  // steps, so a serving file is moved (by less than that) until each of its flows points forward.
  std::vector<double> shift_us;
  std::vector<std::string> links;   // "d pulls from p: 2 store_contains, 4 store_step"
  std::vector<std::string> refusals; // a candidate pairing not drawn, and why
};

// Pure function of the files (any thread).
node_flows match_node_flows(const std::vector<trace_contents>& files);

} // namespace ordo
