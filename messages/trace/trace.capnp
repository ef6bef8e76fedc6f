# The trace schema (docs/traces.md): a trace file is a stream of unpacked framed TraceRecord
# messages; record 0 carries the header. The messages a record carries are messages/ordo.capnp's.
# `capnp decode -I. messages/trace/trace.capnp TraceRecord < FILE` dumps one without ordo.
#
# APPEND-ONLY, as messages/ordo.capnp: recorded traces (tests/data/) must keep decoding. These
# structs moved here from messages/ordo.capnp unchanged: the encoding has no type ids, so traces
# recorded before the move decode the same.

@0xf0a614d644abed80;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ordo::wire");

using Ordo = import "/messages/ordo.capnp";

struct TraceHeader {
  schemaVersion @0 :UInt32;
  ordoVersion @1 :Text;
  configText @2 :Text;     # the node's whole config, as TOML
  configDigest @3 :UInt64; # xxh64 of configText
  namespaceId @4 :UInt64;
  chaosSeed @5 :UInt64;    # device.chaos_seed (0: no chaos)
  startUnixMs @6 :UInt64;  # wall clock at the start; tsNs of every record counts from the start
  node @7 :Text;           # the node's name in a timeline of several nodes
  dropEdge @8 :Text;       # faults.drop_edge ("" when none)
}

enum TraceDirection {
  in @0;    # a message the actor received (handler input, or a reply it got)
  out @1;   # a message the actor sent (send, request or reply)
  local @2; # a device operation, a store verdict, an error
}

enum DeviceOpKind {
  upload @0;          # step inputs, pinned staging → device (writes the inputs buffer)
  clear @1;           # declared fill of units given back
  load @2;            # host object → units (scatter)
  restore @3;         # units → state slot
  forward @4;         # the model's forward and sampling
  checkpointCopy @5;  # state slot → units
  save @6;            # units → host object (gather)
  outputCopy @7;      # logits and sampled tokens → pinned host
  eventRecord @8;     # marks the stream's current end as `eventId`
  eventWait @9;       # the stream waits for `eventId`
  complete @10;       # the step's host callback: every operation before it has completed
  done @11;           # an operation completed (timing only: `opSeq` names it; not an ordering edge)
}

struct DeviceOp {
  op @0 :DeviceOpKind;
  stream @1 :UInt8;                 # 0 compute, 1 load, 2 save
  eventId @2 :UInt64;               # eventRecord / eventWait
  requestId @3 :UInt64;
  unitsRead @4 :List(Int32);
  unitsWritten @5 :List(Int32);
  slotsRead @6 :List(Int32);
  slotsWritten @7 :List(Int32);
  readsInputs @8 :Bool;
  writesInputs @9 :Bool;
  objectKind @10 :UInt8;            # load / save: the host object's kind (0 kv_chunk, 1 state_image)
  dataOffset @11 :UInt64;           # its data in the host arena (what identifies it while pinned)
  dataBytes @12 :UInt64;
  opSeq @13 :UInt64;                # done: the record seq of the operation that completed
  tokens @14 :Int32;                # forward: tokens computed
}

struct StoreVerdict {
  # What the store concluded from bytes it read (an input to its core on replay).
  key @0 :Ordo.ObjectKey;
  status @1 :Text;                  # ok | missing | bad_checksum | bad_header
}

struct TraceRecord {
  seq @0 :UInt64;          # 0 for the header, then 1, 2, … in the order records were made
  tsNs @1 :UInt64;         # monotonic ns since the start
  stepEpoch @2 :UInt64;    # the (epoch, seq) of the step the record belongs to, 0 if none
  stepSeq @3 :UInt64;
  actor @4 :Text;          # scheduler, block_pool, connector, store, model_runner, frontend; a
                           # device operation's lane is model_runner (its stream is in DeviceOp)
  direction @5 :TraceDirection;
  peer @6 :Text;           # the other actor of a message ("device" for the runner's completions)
  kind @7 :Text;           # message type (completion_request, pool_step, …) or device op
  payload :union {
    none @8 :Void;
    header @9 :TraceHeader;
    deviceOp @10 :DeviceOp;
    storeVerdict @11 :StoreVerdict;
    error @12 :Text;                   # a request answered with an error
    completionRequest @13 :Ordo.CompletionRequest;
    completionChunk @14 :Ordo.CompletionChunk;
    completionResult @15 :Ordo.CompletionResult;
    completionFailed @16 :Ordo.CompletionFailed;
    cancelRequest @17 :Ordo.CancelRequest;
    evictRequest @18 :Ordo.EvictRequest;
    evictResult @19 :Ordo.EvictResult;
    stepPlan @20 :Ordo.StepPlan;
    stepDone @21 :Ordo.StepDone;
    poolStep @22 :Ordo.PoolStep;
    poolStepDone @23 :Ordo.PoolStepDone;
    connectorLookup @24 :Ordo.ConnectorLookup;
    connectorLookupDone @25 :Ordo.ConnectorLookupDone;
    connectorStep @26 :Ordo.ConnectorStep;
    connectorStepDone @27 :Ordo.ConnectorStepDone;
    storeContains @28 :Ordo.StoreContains;
    storeContainsDone @29 :Ordo.StoreContainsDone;
    storeStep @30 :Ordo.StoreStep;
    storeStepDone @31 :Ordo.StoreStepDone;
    storeCorrupt @32 :Ordo.StoreCorrupt;
    storeHello @33 :Ordo.StoreHello;
    storeWelcome @34 :Ordo.StoreWelcome;
  }
}
