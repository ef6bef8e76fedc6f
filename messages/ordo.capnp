# Cap'n Proto mirror of the message structs in messages/*.hpp, for traces and the wire.
# One struct per message type; converters in messages/capnp_convert.{hpp,cpp}.
#
# APPEND-ONLY: recorded traces and peers built from older commits must keep decoding. Never
# renumber, retype, rename-with-new-meaning or remove a field; add new fields at the end of a
# struct with the next ordinal, and new structs anywhere. Defaults mirror the C++ defaults so a
# field missing from an older message decodes to the struct's default.

@0x88880d42368e466d;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ordo::wire");

# --- messages/common.hpp ----------------------------------------------------------------------

struct CommandHeader {
  epoch @0 :UInt64;
  seq @1 :UInt64;
}

# --- messages/request.hpp ---------------------------------------------------------------------

struct CompletionRequest {
  requestId @0 :UInt64;
  prompt @1 :List(Int32);
  maxTokens @2 :Int32 = 16;
  temperature @3 :Float32;
  seed @4 :UInt64;
  stream @5 :Bool;
  cacheSalt @6 :Text;
  media @7 :List(MediaSpan);
  stop @8 :List(StopSequence);
  remoteDecode @9 :Bool;   # P/D: prefill for a decode node (kv_transfer_params.do_remote_decode)
  kvPeer @10 :Text;        # P/D: HOST:PORT of the prefill node holding this prompt
  kvTransferId @11 :Text;  # P/D: the prefill node's transfer id (its lease)
}

struct StopSequence {
  tokenIds @0 :List(Int32);
}

struct MediaSpan {
  offset @0 :Int32;
  length @1 :Int32;
  hash @2 :UInt64;
}

struct CompletionChunk {
  requestId @0 :UInt64;
  index @1 :Int32;
  tokenId @2 :Int32;
}

struct CompletionResult {
  requestId @0 :UInt64;
  tokenIds @1 :List(Int32);
  finishReason @2 :Text;
  promptTokens @3 :Int32;
  cachedTokens @4 :Int32;
  resumeAt @5 :Int32;
  fromHbm @6 :Int32;
  fromCpu @7 :Int32;
  fromStore @8 :Int32;
  reason @9 :Text;
  logitsDigest @10 :UInt64;
  numPreemptions @11 :Int32;
  durationMs @12 :Float64;
  firstTokenMs @13 :Float64;
  interTokenMs @14 :List(Float32);
  reasonKind @15 :ResumeReason;
  fromPeer @16 :Int32;     # prompt tokens pulled from a prefill node
  leaseObjects @17 :Int32; # P/D prefill: objects held for the decode node
  leaseMs @18 :Int64;      # ... and for how long
}

# Ordinals match enum class resume_reason (messages/request.hpp).
enum ResumeReason {
  cold @0;
  promptEnd @1;
  blockEvicted @2;
  noCheckpoint @3;
  intervalZero @4;
  shortPrompt @5;
  hostTier @6;
  hostLoadFailed @7;
}

struct CompletionFailed {
  requestId @0 :UInt64;
  message @1 :Text;
  type @2 :Text;
}

struct CancelRequest {
  requestId @0 :UInt64;
}

struct EvictRequest {
  tier @0 :Text;
  requestId @1 :UInt64;
}

struct EvictResult {
  tier @0 :Text;
  numBlocks @1 :Int32;
  requestId @2 :UInt64;
}

# --- messages/step.hpp ------------------------------------------------------------------------

struct ScheduledRequest {
  requestId @0 :UInt64;
  stateSlot @1 :Int32 = -1;
  resetState @2 :Bool;
  firstPosition @3 :Int32;
  tokenIds @4 :List(Int32);
  blockTable @5 :List(Int32);
  sample @6 :Bool;
  temperature @7 :Float32;
  seed @8 :UInt64;
}

struct StateImageCopy {
  requestId @0 :UInt64;
  stateSlot @1 :Int32 = -1;
  position @2 :Int32;
  units @3 :List(Int32);
}

struct StepPlan {
  header @0 :CommandHeader;
  requests @1 :List(ScheduledRequest);
  clears @2 :List(Int32);
  restores @3 :List(StateImageCopy);
  checkpointCopies @4 :List(StateImageCopy);
  loads @5 :List(UnitTransfer);
  saves @6 :List(UnitTransfer);
}

struct UnitTransfer {
  requestId @0 :UInt64;
  kind @1 :UInt8;  # ordo::object_kind
  dataOffset @2 :UInt64;
  dataBytes @3 :UInt64;
  units @4 :List(Int32);
}

struct SampledToken {
  requestId @0 :UInt64;
  position @1 :Int32;
  tokenId @2 :Int32;
  logitsDigest @3 :UInt64;
}

struct StepDone {
  header @0 :CommandHeader;
  samples @1 :List(SampledToken);
  deviceMs @2 :Float64;
  saveChecksums @3 :List(UInt64);  # per plan save, in plan order; empty: the host hashes
  loadChecksums @4 :List(UInt64);  # per plan load, summed by its scatter; empty: none summed
}

# --- messages/pool.hpp ------------------------------------------------------------------------

struct BlockCommit {
  requestId @0 :UInt64;
  blockIndex @1 :Int32;
  hash @2 :UInt64;
}

struct CheckpointPosition {
  position @0 :Int32;
  hash @1 :UInt64;
}

struct ReservedImage {
  position @0 :Int32;
  hash @1 :UInt64;
  units @2 :List(Int32);
}

struct BlockGrow {
  requestId @0 :UInt64;
  hashes @1 :List(UInt64);
  maxHitBlocks @2 :Int32;
  totalBlocks @3 :Int32;
  needsState @4 :Bool;
  checkpoints @5 :List(CheckpointPosition);
  unitsPerImage @6 :Int32;
  loadImagePosition @7 :Int32;
}

struct ImageUnpin {
  requestId @0 :UInt64;
  hash @1 :UInt64;
}

struct PoolStep {
  header @0 :CommandHeader;
  releases @1 :List(UInt64);
  commits @2 :List(BlockCommit);
  evictHbm @3 :Bool;
  grows @4 :List(BlockGrow);
  imagesReady @5 :List(UInt64);
  unpins @6 :List(ImageUnpin);
  imageAborts @7 :List(ImageUnpin);
}

struct GrowResult {
  requestId @0 :UInt64;
  ok @1 :Bool;
  numHitBlocks @2 :Int32;
  blockTable @3 :List(Int32);
  kvHitBlocks @4 :Int32;
  restoreHash @5 :UInt64;
  restoreUnits @6 :List(Int32);
  reserved @7 :List(ReservedImage);
  loadUnits @8 :List(Int32);
}

struct PoolStepDone {
  header @0 :CommandHeader;
  results @1 :List(GrowResult);
  numEvicted @2 :Int32;
  numFree @3 :Int32;
  numCached @4 :Int32;
  clears @5 :List(Int32);
  numImagesEvicted @6 :Int32;
  numImages @7 :Int32;
  numAvailable @8 :Int32;
}

# --- messages/connector.hpp -------------------------------------------------------------------

struct ConnectorLookup {
  requestId @0 :UInt64;
  hashes @1 :List(UInt64);
  numPromptTokens @2 :Int32;
  peer @3 :Text;           # P/D: the prefill node to look up in ("" = this node's tiers)
  transferId @4 :Text;     # P/D: the prefill node's lease, released after the loads
}

struct ConnectorLookupDone {
  requestId @0 :UInt64;
  cpuTokens @1 :Int32;
  storeTokens @2 :Int32;
  connector @3 :Text;
  cpuChunks @4 :List(KvObject);
  cpuStatePositions @5 :List(Int32);
  granularity @6 :Text;  # the store's: "" or "block" = block, "chunk" = chunk (SPEC D2)
  fromPeer @7 :Bool;       # P/D: the coverage lies in a prefill node's host tier
}

struct KvObject {
  firstBlock @0 :Int32;
  numBlocks @1 :Int32;
  hash @2 :UInt64;
}

struct TransferOrder {
  requestId @0 :UInt64;
  object @1 :ObjectRef;
}

struct TransferResult {
  requestId @0 :UInt64;
  key @1 :ObjectKey;
  isSave @2 :Bool;
  ok @3 :Bool;
  summed @4 :Bool;     # a save whose checksum the gather computed
  checksum @5 :UInt64;
  corrupt @6 :Bool;    # a load whose scatter found the object's checksum wrong: drop it
}

struct ConnectorStep {
  header @0 :CommandHeader;
  finished @1 :List(TransferResult);
  loads @2 :List(TransferOrder);
  saves @3 :List(TransferOrder);
  evictAll @4 :Bool;
  leases @5 :List(LeaseOrder);  # P/D prefill: hold the prompt's objects for the decode node
}

struct LeaseOrder {
  requestId @0 :UInt64;
  hashes @1 :List(UInt64);
  numPromptTokens @2 :Int32;
}

struct LeaseGrant {
  requestId @0 :UInt64;
  numObjects @1 :Int32;
  leaseMs @2 :Int64;
}

struct TransferGrant {
  requestId @0 :UInt64;
  key @1 :ObjectKey;
  ok @2 :Bool;
  status @3 :Text;
  dataOffset @4 :UInt64;
  dataBytes @5 :UInt64;
  copies @6 :List(UInt64);  # multi: the same save written at these offsets too (one per leaf)
  summed @7 :Bool;          # a load the scatter verifies against `checksum`
  checksum @8 :UInt64;
}

struct ConnectorStepDone {
  header @0 :CommandHeader;
  loads @1 :List(TransferGrant);
  saves @2 :List(TransferGrant);
  stats @3 :StoreStats;
  numEvicted @4 :Int32;
  granularity @5 :Text;  # the store's: "" or "block" = block, "chunk" = chunk (SPEC D2)
  leases @6 :List(LeaseGrant);
}

# --- messages/store.hpp -----------------------------------------------------------------------

struct ObjectKey {
  namespaceId @0 :UInt64;
  hash @1 :UInt64;
  kind @2 :UInt8;  # ordo::object_kind: 0 kv_chunk, 1 state_image
}

struct StoreContains {
  keys @0 :List(ObjectKey);
}

struct StoreContainsDone {
  numLeadingCommitted @0 :Int32;
  present @1 :List(UInt8);  # per key: 1 if committed
  granularity @2 :Text;  # the store's: "" or "block" = block, "chunk" = chunk (SPEC D2)
}

struct StoreStats {
  numObjects @0 :Int64;
  bytesUsed @1 :Int64;
  bytesCapacity @2 :Int64;
  commitsTotal @3 :Int64;
  evictionsTotal @4 :Int64;
  pinsTotal @5 :Int64;
  missesTotal @6 :Int64;
  checksumFailuresTotal @7 :Int64;
  headerFailuresTotal @8 :Int64;
  rejectedTotal @9 :Int64;
  reservesTotal @10 :Int64;
  abortsTotal @11 :Int64;
}

struct ObjectRef {
  key @0 :ObjectKey;
  firstToken @1 :Int32;
  tokens @2 :Int32;
  numBlocks @3 :Int32;
  dataBytes @4 :UInt64;
}

struct StoreGrant {
  key @0 :ObjectKey;
  ok @1 :Bool;
  status @2 :Text;
  dataOffset @3 :UInt64;
  dataBytes @4 :UInt64;
  checksum @5 :UInt64;  # a pin: the object's recorded checksum
}

struct StoreStep {
  header @0 :CommandHeader;
  commits @1 :List(ObjectKey);
  aborts @2 :List(ObjectKey);
  unpins @3 :List(ObjectKey);
  pins @4 :List(ObjectRef);
  reserves @5 :List(ObjectRef);
  evictAll @6 :Bool;
  leases @7 :List(StoreLease);  # P/D: hold objects for a decode node
  releases @8 :List(Text);      # P/D: transfer ids whose leases end
  commitChecksums @9 :List(UInt64);  # empty, or one per commit (computed by the gather)
  pinsSummed @10 :Bool;               # the reader's scatters verify the pins: check headers only
  unpinsCorrupt @11 :List(ObjectKey); # unpins of objects a scatter found corrupt: drop them
}

struct StoreLease {
  transferId @0 :Text;
  keys @1 :List(ObjectKey);
  leaseMs @2 :Int64;
}

struct StoreStepDone {
  header @0 :CommandHeader;
  pins @1 :List(StoreGrant);
  reserves @2 :List(StoreGrant);
  stats @3 :StoreStats;
  numEvicted @4 :Int32;
  granularity @5 :Text;  # the store's: "" or "block" = block, "chunk" = chunk (SPEC D2)
  leased @6 :List(Int32);       # per lease: the objects it holds
}

struct StoreCorrupt {
  kind @0 :UInt8;  # ordo::object_kind
}

# --- traces: messages/trace/trace.capnp -----------------------------------------------------
# TraceRecord and the structs only it holds live there; its payload carries the messages above.

# --- the store server's session and data path (messages/store.hpp) ----------------------------

struct StoreHello {
  # node -> store server, first request of a session (ordo::store_hello).
  wire @0 :Text;           # "ordo-wire-1"
  wireDigest @1 :UInt64;   # digest of this file's text, embedded at build time
  engineId @2 :Text;
  namespaceId @3 :UInt64;
  bootId @4 :Text;
  challenge @5 :Text;      # random hex the welcome's proof covers (docs/security.md)
  role @6 :Text;           # kv_both | kv_producer | kv_consumer (read only)
  mac @7 :Text;            # HMAC-SHA256 with the deployment secret over the hello's fields
  certificate @8 :Text;    # security.tls on: the node's PEM certificate (its role: admin | node)
  signature @9 :Text;      # hex: that certificate's key's signature over the hello's fields
}

struct StoreWelcome {
  # store server -> node: the session is open (ok) or refused (why names both values).
  ok @0 :Bool;
  why @1 :Text;
  storeId @2 :Text;
  arenaBytes @3 :UInt64;
  granularity @4 :Text;    # block | chunk
  wireDigest @5 :UInt64;
  bootId @6 :Text;
  arenaSocket @7 :Text;    # abstract AF_UNIX name that hands out the arena's memfd
  proof @8 :Text;          # HMAC-SHA256 with the deployment secret over the hello's challenge
}

struct StoreRead {
  # node -> store server (store.transport = "tcp"): a piece of a pinned object's data.
  key @0 :ObjectKey;
  offset @1 :UInt64;
  bytes @2 :UInt64;
}

struct StoreReadDone {
  key @0 :ObjectKey;
  offset @1 :UInt64;
  data @2 :List(UInt8);
}

struct StoreWrite {
  # node -> store server (store.transport = "tcp"): a piece of a reserved object's data.
  key @0 :ObjectKey;
  offset @1 :UInt64;
  data @2 :List(UInt8);
}

struct StoreWriteDone {
  key @0 :ObjectKey;
  offset @1 :UInt64;
  bytes @2 :UInt64;
}
