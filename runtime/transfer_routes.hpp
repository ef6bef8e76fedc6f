// The connector's core (issue 38 item 1), one for every connector kind: a route table says which
// stores the connector reaches and what each leaf plays; the core asks a lookup's stores one after
// another, splits each connector step into one store step per store (each with that store's own
// (epoch, seq)), and merges the stores' answers back into one connector_step_done. Pure: no CAF.
// The connector actor (actors/connector.cpp) is its shell: it names each store_ref with an actor
// (a peer's store client spawned on first use), sends what the core returns and replies.
//   event                       what the core returns
//   connector_lookup            start_lookup: the first store to ask and its probe, or the answer
//   store_contains_done         lookup_answered: the answer (first hit wins), or the next store to ask
//   connector_step              split: one store_step per store, in the order merge reads them
//   every store's store_step_done   merge: the connector_step_done (std::logic_error: a malformed answer)
//   a peer's store client ended forget_peer
// The kinds (route tables built by runtime/node_options.cpp:derive_node_options):
//   none            one leaf that holds nothing: a lookup answers 0 tokens, a step refuses every
//                   load and save, and no store is asked.
//   offload, store  one leaf over the node's host tier (runtime/offload_policy), whose store steps
//                   carry the connector step's own (epoch, seq).
//   pd, pd_kv       one P/D leaf: this node's published tier, and for a request whose lookup named a
//                   prefill node, that node's store: the lookup, the loads and their unpins go there
//                   (the unpins with the release of the request's lease, once); saves, commits,
//                   evictions and leases stay here, and this node's store gets every step (its answer
//                   carries the stats).
//   multi           leaves in lookup order, each a store (a P/D leaf with its peers, an offload leaf):
//                   the first leaf whose lookup holds KV answers ("multi:<leaf>") and takes that
//                   request's loads and unpins; saves fan out to every leaf (a save several leaves
//                   grant is one grant with the others' window offsets in `copies`, committed or
//                   aborted at each leaf that granted it); leases go to the P/D leaf.
// NOTE(freed-after-every-leaf): a block's bytes are read by every leaf's copy inside the step that
// saves it, and the scheduler frees blocks only after that step's step_done, so no block is reused
// before every leaf is done with it.
// NOTE(peer-clients): a decode node keeps at most max_peer_clients peers' stores; a lookup naming
// another peer past that recomputes. The shell ends an idle client and calls forget_peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "messages/connector.hpp"
#include "messages/store.hpp"
#include "runtime/host_store.hpp" // object_key_hash
#include "runtime/offload_policy.hpp"
#include "runtime/recent_requests.hpp"
#include "runtime/sequence_check.hpp"

namespace ordo {

inline constexpr size_t max_peer_clients = 64;

// What a leaf of a route table plays.
enum class route_kind : uint8_t {
  none,    // holds nothing, reaches no store
  offload, // the node's host tier: the in-process store, or a store server's session
  pd,      // this node's published tier, and the prefill nodes' stores its lookups name
};

// One leaf: a store (with, for P/D, the peers' stores) and how the connector speaks to it.
struct store_route {
  std::string name; // the kind it plays ("offload", "store", "pd", "pd_kv"); multi answers "multi:<name>"
  route_kind kind = route_kind::offload;
  offload_options policy;     // keys, kv_role, the lease length (unused by none)
  uint64_t window_offset = 0; // multi: its store's arena in the node's host window (set where it is mapped)
  bool takes_leases = false;  // multi: lease orders go to it
};

struct route_table {
  std::string name = "none"; // kv_transfer.connector
  std::vector<store_route> leaves; // one, or multi's in lookup order
  // Each store's steps get their own (epoch, seq); false: the one store's steps carry the
  // connector step's (offload, store).
  bool store_stamps = false;
  bool multi() const { return leaves.size() > 1; }
};

// A store the connector reaches: leaf `leaf`'s own store (peer ""), or, for a P/D leaf, the store of
// the prefill node at `peer` ("HOST:PORT").
struct store_ref {
  size_t leaf = 0;
  std::string peer;
  bool operator<(const store_ref& o) const { return std::tie(leaf, peer) < std::tie(o.leaf, o.peer); }
  bool operator==(const store_ref& o) const { return leaf == o.leaf && peer == o.peer; }
};

// A store a lookup asks: `probe` to `store`; its answer goes to lookup_answered.
struct lookup_ask {
  store_ref store;
  store_contains probe;
  bool from_peer = false; // the coverage it finds lies in a P/D peer's host tier
};

// What a lookup does next: ask a store, or answer.
struct lookup_next {
  std::optional<lookup_ask> ask;
  std::optional<connector_lookup_done> done;
  std::optional<size_t> hit_leaf; // multi, with `done`: the leaf that answered with KV
  std::vector<std::string> notes; // for the log
  // Peers' stores this lookup admitted: the shell holds a client for each from now on (one whose
  // lookup had nothing to probe still connects, and ends when idle as any does).
  std::vector<store_ref> opened;
};

// One store's share of a connector step.
struct store_part {
  store_ref store;
  store_step step;
};

// A connector step split by store, and what merge needs to put the answers back in order.
struct split_step {
  connector_step step;          // as the scheduler sent it
  std::vector<store_part> parts; // requested together; merge reads the answers in this order
  // Per leaf: the orders routed to it, and where they sit in `step` (multi only).
  struct leaf_share {
    connector_step sub;
    std::vector<size_t> load_index, lease_index;
  };
  std::vector<leaf_share> leaves;
  // Per part: the orders of its leaf's `sub` it carries, and where they sit there.
  struct part_share {
    connector_step sub;
    std::vector<size_t> load_index, save_index;
  };
  std::vector<part_share> shares;
};

class transfer_routes {
public:
  explicit transfer_routes(route_table table); // std::invalid_argument: a table without leaves
  const route_table& table() const { return table_; }

  lookup_next start_lookup(const connector_lookup& lookup);
  lookup_next lookup_answered(const connector_lookup& lookup, const lookup_ask& asked, const store_contains_done& found);

  split_step split(const connector_step& step);
  // The answer to split.step from answers[i] to split.parts[i]; throws std::logic_error if they do
  // not answer every order.
  connector_step_done merge(const split_step& split, const std::vector<store_step_done>& answers);

  // A peer's store client ended (idle, or failed): the next use of that peer is a new store.
  void forget_peer(const store_ref& store);
  size_t num_peers() const;

private:
  struct peer_request {
    std::string peer;
    std::string transfer_id; // the lease the loads' unpins release there ("" once released)
  };
  struct leaf_state {
    store_route route;
    std::optional<offload_policy> policy;   // none: none
    recent_requests<peer_request> request_peer; // P/D: requests whose loads go to a peer
    std::map<std::string, sequence_stamp> peers; // P/D: the peers' stores the shell holds
  };

  lookup_next from_leaf(const connector_lookup& lookup, size_t leaf);
  lookup_next settle(const connector_lookup& lookup, size_t leaf, connector_lookup_done done);
  bool admit_peer(leaf_state& leaf, const std::string& peer, bool always);
  command_header stamp(const store_ref& store, const command_header& step_header);
  void share(const connector_step& step, split_step& out);
  void split_leaf(size_t leaf, split_step& out);
  connector_step_done merge_leaf(const split_step& split, size_t leaf, const std::vector<store_step_done>& answers) const;
  connector_step_done merge_multi(const split_step& split, std::vector<connector_step_done> leaves);

  route_table table_;
  std::vector<leaf_state> leaves_;
  std::vector<sequence_stamp> own_stamps_; // per leaf: its own store's steps
  recent_requests<size_t> winner_;          // multi: request → the leaf whose coverage it loads
  // multi: saves granted and not yet committed or aborted: the leaves that granted each.
  std::unordered_map<object_key, std::vector<size_t>, object_key_hash> saving_;
};

} // namespace ordo
