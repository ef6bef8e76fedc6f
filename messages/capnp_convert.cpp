#include "messages/capnp_convert.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

namespace ordo {

namespace {

// std::string keeps a NUL after its data, which kj::StringPtr requires.
kj::StringPtr text(const std::string& s) {
  return kj::StringPtr(s.c_str(), s.size());
}

std::string str(capnp::Text::Reader t) {
  return std::string(t.cStr(), t.size());
}

template <class ListBuilder, class V>
void fill_list(ListBuilder l, const std::vector<V>& v) {
  for (unsigned i = 0; i < v.size(); ++i)
    l.set(i, v[i]);
}

template <class V, class ListReader>
std::vector<V> read_list(ListReader l) {
  std::vector<V> v;
  v.reserve(l.size());
  for (auto e : l)
    v.push_back(e);
  return v;
}

template <class ListBuilder, class T>
void fill_structs(ListBuilder l, const std::vector<T>& v) {
  for (unsigned i = 0; i < v.size(); ++i)
    to_capnp(v[i], l[i]);
}

template <class T, class ListReader>
std::vector<T> read_structs(ListReader l) {
  std::vector<T> v;
  v.reserve(l.size());
  for (auto e : l)
    v.push_back(from_capnp(e));
  return v;
}

} // namespace

// --- common.hpp -------------------------------------------------------------------------------

void to_capnp(const command_header& x, wire::CommandHeader::Builder b) {
  b.setEpoch(x.epoch);
  b.setSeq(x.seq);
}

command_header from_capnp(wire::CommandHeader::Reader r) {
  command_header x;
  x.epoch = r.getEpoch();
  x.seq = r.getSeq();
  return x;
}

// --- request.hpp ------------------------------------------------------------------------------

void to_capnp(const completion_request& x, wire::CompletionRequest::Builder b) {
  b.setRequestId(x.request_id);
  fill_list(b.initPrompt(x.prompt.size()), x.prompt);
  b.setMaxTokens(x.max_tokens);
  b.setTemperature(x.temperature);
  b.setSeed(x.seed);
  b.setStream(x.stream);
  b.setCacheSalt(text(x.cache_salt));
  fill_structs(b.initMedia(x.media.size()), x.media);
  fill_structs(b.initStop(x.stop.size()), x.stop);
}

completion_request from_capnp(wire::CompletionRequest::Reader r) {
  completion_request x;
  x.request_id = r.getRequestId();
  x.prompt = read_list<int32_t>(r.getPrompt());
  x.max_tokens = r.getMaxTokens();
  x.temperature = r.getTemperature();
  x.seed = r.getSeed();
  x.stream = r.getStream();
  x.cache_salt = str(r.getCacheSalt());
  x.media = read_structs<media_span>(r.getMedia());
  x.stop = read_structs<stop_sequence>(r.getStop());
  return x;
}

void to_capnp(const stop_sequence& x, wire::StopSequence::Builder b) {
  fill_list(b.initTokenIds(x.token_ids.size()), x.token_ids);
}

stop_sequence from_capnp(wire::StopSequence::Reader r) {
  stop_sequence x;
  x.token_ids = read_list<int32_t>(r.getTokenIds());
  return x;
}

void to_capnp(const media_span& x, wire::MediaSpan::Builder b) {
  b.setOffset(x.offset);
  b.setLength(x.length);
  b.setHash(x.hash);
}

media_span from_capnp(wire::MediaSpan::Reader r) {
  media_span x;
  x.offset = r.getOffset();
  x.length = r.getLength();
  x.hash = r.getHash();
  return x;
}

void to_capnp(const completion_chunk& x, wire::CompletionChunk::Builder b) {
  b.setRequestId(x.request_id);
  b.setIndex(x.index);
  b.setTokenId(x.token_id);
}

completion_chunk from_capnp(wire::CompletionChunk::Reader r) {
  completion_chunk x;
  x.request_id = r.getRequestId();
  x.index = r.getIndex();
  x.token_id = r.getTokenId();
  return x;
}

void to_capnp(const completion_result& x, wire::CompletionResult::Builder b) {
  b.setRequestId(x.request_id);
  fill_list(b.initTokenIds(x.token_ids.size()), x.token_ids);
  b.setFinishReason(text(x.finish_reason));
  b.setPromptTokens(x.prompt_tokens);
  b.setCachedTokens(x.cached_tokens);
  b.setResumeAt(x.resume_at);
  b.setFromHbm(x.from_hbm);
  b.setFromCpu(x.from_cpu);
  b.setFromStore(x.from_store);
  b.setReason(text(x.reason));
  b.setLogitsDigest(x.logits_digest);
  b.setNumPreemptions(x.num_preemptions);
  b.setDurationMs(x.duration_ms);
  b.setFirstTokenMs(x.first_token_ms);
  fill_list(b.initInterTokenMs(x.inter_token_ms.size()), x.inter_token_ms);
  b.setReasonKind(static_cast<wire::ResumeReason>(x.reason_kind));
}

completion_result from_capnp(wire::CompletionResult::Reader r) {
  completion_result x;
  x.request_id = r.getRequestId();
  x.token_ids = read_list<int32_t>(r.getTokenIds());
  x.finish_reason = str(r.getFinishReason());
  x.prompt_tokens = r.getPromptTokens();
  x.cached_tokens = r.getCachedTokens();
  x.resume_at = r.getResumeAt();
  x.from_hbm = r.getFromHbm();
  x.from_cpu = r.getFromCpu();
  x.from_store = r.getFromStore();
  x.reason = str(r.getReason());
  x.logits_digest = r.getLogitsDigest();
  x.num_preemptions = r.getNumPreemptions();
  x.duration_ms = r.getDurationMs();
  x.first_token_ms = r.getFirstTokenMs();
  x.inter_token_ms = read_list<float>(r.getInterTokenMs());
  x.reason_kind = static_cast<resume_reason>(r.getReasonKind());
  return x;
}

void to_capnp(const completion_failed& x, wire::CompletionFailed::Builder b) {
  b.setRequestId(x.request_id);
  b.setMessage(text(x.message));
  b.setType(text(x.type));
}

completion_failed from_capnp(wire::CompletionFailed::Reader r) {
  completion_failed x;
  x.request_id = r.getRequestId();
  x.message = str(r.getMessage());
  x.type = str(r.getType());
  return x;
}

void to_capnp(const cancel_request& x, wire::CancelRequest::Builder b) { b.setRequestId(x.request_id); }

cancel_request from_capnp(wire::CancelRequest::Reader r) {
  cancel_request x;
  x.request_id = r.getRequestId();
  return x;
}

void to_capnp(const evict_request& x, wire::EvictRequest::Builder b) {
  b.setRequestId(x.request_id);
  b.setTier(text(x.tier));
}

evict_request from_capnp(wire::EvictRequest::Reader r) {
  evict_request x;
  x.request_id = r.getRequestId();
  x.tier = str(r.getTier());
  return x;
}

void to_capnp(const evict_result& x, wire::EvictResult::Builder b) {
  b.setRequestId(x.request_id);
  b.setTier(text(x.tier));
  b.setNumBlocks(x.num_blocks);
}

evict_result from_capnp(wire::EvictResult::Reader r) {
  evict_result x;
  x.request_id = r.getRequestId();
  x.tier = str(r.getTier());
  x.num_blocks = r.getNumBlocks();
  return x;
}

// --- step.hpp ---------------------------------------------------------------------------------

void to_capnp(const scheduled_request& x, wire::ScheduledRequest::Builder b) {
  b.setRequestId(x.request_id);
  b.setStateSlot(x.state_slot);
  b.setResetState(x.reset_state);
  b.setFirstPosition(x.first_position);
  fill_list(b.initTokenIds(x.token_ids.size()), x.token_ids);
  fill_list(b.initBlockTable(x.block_table.size()), x.block_table);
  b.setSample(x.sample);
  b.setTemperature(x.temperature);
  b.setSeed(x.seed);
}

scheduled_request from_capnp(wire::ScheduledRequest::Reader r) {
  scheduled_request x;
  x.request_id = r.getRequestId();
  x.state_slot = r.getStateSlot();
  x.reset_state = r.getResetState();
  x.first_position = r.getFirstPosition();
  x.token_ids = read_list<int32_t>(r.getTokenIds());
  x.block_table = read_list<int32_t>(r.getBlockTable());
  x.sample = r.getSample();
  x.temperature = r.getTemperature();
  x.seed = r.getSeed();
  return x;
}

void to_capnp(const state_image_copy& x, wire::StateImageCopy::Builder b) {
  b.setRequestId(x.request_id);
  b.setStateSlot(x.state_slot);
  b.setPosition(x.position);
  fill_list(b.initUnits(x.units.size()), x.units);
}

state_image_copy from_capnp(wire::StateImageCopy::Reader r) {
  state_image_copy x;
  x.request_id = r.getRequestId();
  x.state_slot = r.getStateSlot();
  x.position = r.getPosition();
  x.units = read_list<int32_t>(r.getUnits());
  return x;
}

void to_capnp(const unit_transfer& x, wire::UnitTransfer::Builder b) {
  b.setRequestId(x.request_id);
  b.setKind(x.kind);
  b.setDataOffset(x.data_offset);
  b.setDataBytes(x.data_bytes);
  fill_list(b.initUnits(x.units.size()), x.units);
}

unit_transfer from_capnp(wire::UnitTransfer::Reader r) {
  unit_transfer x;
  x.request_id = r.getRequestId();
  x.kind = r.getKind();
  x.data_offset = r.getDataOffset();
  x.data_bytes = r.getDataBytes();
  x.units = read_list<int32_t>(r.getUnits());
  return x;
}

void to_capnp(const step_plan& x, wire::StepPlan::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_structs(b.initRequests(x.requests.size()), x.requests);
  fill_list(b.initClears(x.clears.size()), x.clears);
  fill_structs(b.initRestores(x.restores.size()), x.restores);
  fill_structs(b.initCheckpointCopies(x.checkpoint_copies.size()), x.checkpoint_copies);
  fill_structs(b.initLoads(x.loads.size()), x.loads);
  fill_structs(b.initSaves(x.saves.size()), x.saves);
}

step_plan from_capnp(wire::StepPlan::Reader r) {
  step_plan x;
  x.header = from_capnp(r.getHeader());
  x.requests = read_structs<scheduled_request>(r.getRequests());
  x.clears = read_list<int32_t>(r.getClears());
  x.restores = read_structs<state_image_copy>(r.getRestores());
  x.checkpoint_copies = read_structs<state_image_copy>(r.getCheckpointCopies());
  x.loads = read_structs<unit_transfer>(r.getLoads());
  x.saves = read_structs<unit_transfer>(r.getSaves());
  return x;
}

void to_capnp(const sampled_token& x, wire::SampledToken::Builder b) {
  b.setRequestId(x.request_id);
  b.setPosition(x.position);
  b.setTokenId(x.token_id);
  b.setLogitsDigest(x.logits_digest);
}

sampled_token from_capnp(wire::SampledToken::Reader r) {
  sampled_token x;
  x.request_id = r.getRequestId();
  x.position = r.getPosition();
  x.token_id = r.getTokenId();
  x.logits_digest = r.getLogitsDigest();
  return x;
}

void to_capnp(const step_done& x, wire::StepDone::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_structs(b.initSamples(x.samples.size()), x.samples);
  b.setDeviceMs(x.device_ms);
}

step_done from_capnp(wire::StepDone::Reader r) {
  step_done x;
  x.header = from_capnp(r.getHeader());
  x.samples = read_structs<sampled_token>(r.getSamples());
  x.device_ms = r.getDeviceMs();
  return x;
}

// --- pool.hpp ---------------------------------------------------------------------------------

void to_capnp(const block_commit& x, wire::BlockCommit::Builder b) {
  b.setRequestId(x.request_id);
  b.setBlockIndex(x.block_index);
  b.setHash(x.hash);
}

block_commit from_capnp(wire::BlockCommit::Reader r) {
  block_commit x;
  x.request_id = r.getRequestId();
  x.block_index = r.getBlockIndex();
  x.hash = r.getHash();
  return x;
}

void to_capnp(const checkpoint_position& x, wire::CheckpointPosition::Builder b) {
  b.setPosition(x.position);
  b.setHash(x.hash);
}

checkpoint_position from_capnp(wire::CheckpointPosition::Reader r) {
  checkpoint_position x;
  x.position = r.getPosition();
  x.hash = r.getHash();
  return x;
}

void to_capnp(const reserved_image& x, wire::ReservedImage::Builder b) {
  b.setPosition(x.position);
  b.setHash(x.hash);
  fill_list(b.initUnits(x.units.size()), x.units);
}

reserved_image from_capnp(wire::ReservedImage::Reader r) {
  reserved_image x;
  x.position = r.getPosition();
  x.hash = r.getHash();
  x.units = read_list<int32_t>(r.getUnits());
  return x;
}

void to_capnp(const block_grow& x, wire::BlockGrow::Builder b) {
  b.setRequestId(x.request_id);
  fill_list(b.initHashes(x.hashes.size()), x.hashes);
  b.setMaxHitBlocks(x.max_hit_blocks);
  b.setTotalBlocks(x.total_blocks);
  b.setNeedsState(x.needs_state);
  fill_structs(b.initCheckpoints(x.checkpoints.size()), x.checkpoints);
  b.setUnitsPerImage(x.units_per_image);
  b.setLoadImagePosition(x.load_image_position);
}

block_grow from_capnp(wire::BlockGrow::Reader r) {
  block_grow x;
  x.request_id = r.getRequestId();
  x.hashes = read_list<uint64_t>(r.getHashes());
  x.max_hit_blocks = r.getMaxHitBlocks();
  x.total_blocks = r.getTotalBlocks();
  x.needs_state = r.getNeedsState();
  x.checkpoints = read_structs<checkpoint_position>(r.getCheckpoints());
  x.units_per_image = r.getUnitsPerImage();
  x.load_image_position = r.getLoadImagePosition();
  return x;
}

void to_capnp(const image_unpin& x, wire::ImageUnpin::Builder b) {
  b.setRequestId(x.request_id);
  b.setHash(x.hash);
}

image_unpin from_capnp(wire::ImageUnpin::Reader r) {
  image_unpin x;
  x.request_id = r.getRequestId();
  x.hash = r.getHash();
  return x;
}

void to_capnp(const pool_step& x, wire::PoolStep::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_list(b.initReleases(x.releases.size()), x.releases);
  fill_structs(b.initCommits(x.commits.size()), x.commits);
  b.setEvictHbm(x.evict_hbm);
  fill_structs(b.initGrows(x.grows.size()), x.grows);
  fill_list(b.initImagesReady(x.images_ready.size()), x.images_ready);
  fill_structs(b.initUnpins(x.unpins.size()), x.unpins);
  fill_structs(b.initImageAborts(x.image_aborts.size()), x.image_aborts);
}

pool_step from_capnp(wire::PoolStep::Reader r) {
  pool_step x;
  x.header = from_capnp(r.getHeader());
  x.releases = read_list<uint64_t>(r.getReleases());
  x.commits = read_structs<block_commit>(r.getCommits());
  x.evict_hbm = r.getEvictHbm();
  x.grows = read_structs<block_grow>(r.getGrows());
  x.images_ready = read_list<uint64_t>(r.getImagesReady());
  x.unpins = read_structs<image_unpin>(r.getUnpins());
  x.image_aborts = read_structs<image_unpin>(r.getImageAborts());
  return x;
}

void to_capnp(const grow_result& x, wire::GrowResult::Builder b) {
  b.setRequestId(x.request_id);
  b.setOk(x.ok);
  b.setNumHitBlocks(x.num_hit_blocks);
  fill_list(b.initBlockTable(x.block_table.size()), x.block_table);
  b.setKvHitBlocks(x.kv_hit_blocks);
  b.setRestoreHash(x.restore_hash);
  fill_list(b.initRestoreUnits(x.restore_units.size()), x.restore_units);
  fill_structs(b.initReserved(x.reserved.size()), x.reserved);
  fill_list(b.initLoadUnits(x.load_units.size()), x.load_units);
}

grow_result from_capnp(wire::GrowResult::Reader r) {
  grow_result x;
  x.request_id = r.getRequestId();
  x.ok = r.getOk();
  x.num_hit_blocks = r.getNumHitBlocks();
  x.block_table = read_list<int32_t>(r.getBlockTable());
  x.kv_hit_blocks = r.getKvHitBlocks();
  x.restore_hash = r.getRestoreHash();
  x.restore_units = read_list<int32_t>(r.getRestoreUnits());
  x.reserved = read_structs<reserved_image>(r.getReserved());
  x.load_units = read_list<int32_t>(r.getLoadUnits());
  return x;
}

void to_capnp(const pool_step_done& x, wire::PoolStepDone::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_structs(b.initResults(x.results.size()), x.results);
  b.setNumEvicted(x.num_evicted);
  b.setNumFree(x.num_free);
  b.setNumCached(x.num_cached);
  fill_list(b.initClears(x.clears.size()), x.clears);
  b.setNumImagesEvicted(x.num_images_evicted);
  b.setNumImages(x.num_images);
  b.setNumAvailable(x.num_available);
}

pool_step_done from_capnp(wire::PoolStepDone::Reader r) {
  pool_step_done x;
  x.header = from_capnp(r.getHeader());
  x.results = read_structs<grow_result>(r.getResults());
  x.num_evicted = r.getNumEvicted();
  x.num_free = r.getNumFree();
  x.num_cached = r.getNumCached();
  x.clears = read_list<int32_t>(r.getClears());
  x.num_images_evicted = r.getNumImagesEvicted();
  x.num_images = r.getNumImages();
  x.num_available = r.getNumAvailable();
  return x;
}

// --- connector.hpp ----------------------------------------------------------------------------

void to_capnp(const connector_lookup& x, wire::ConnectorLookup::Builder b) {
  b.setRequestId(x.request_id);
  fill_list(b.initHashes(x.hashes.size()), x.hashes);
  b.setNumPromptTokens(x.num_prompt_tokens);
}

connector_lookup from_capnp(wire::ConnectorLookup::Reader r) {
  connector_lookup x;
  x.request_id = r.getRequestId();
  x.hashes = read_list<uint64_t>(r.getHashes());
  x.num_prompt_tokens = r.getNumPromptTokens();
  return x;
}

void to_capnp(const connector_lookup_done& x, wire::ConnectorLookupDone::Builder b) {
  b.setRequestId(x.request_id);
  b.setCpuTokens(x.cpu_tokens);
  b.setStoreTokens(x.store_tokens);
  b.setConnector(text(x.connector));
  fill_structs(b.initCpuChunks(x.cpu_chunks.size()), x.cpu_chunks);
  fill_list(b.initCpuStatePositions(x.cpu_state_positions.size()), x.cpu_state_positions);
}

connector_lookup_done from_capnp(wire::ConnectorLookupDone::Reader r) {
  connector_lookup_done x;
  x.request_id = r.getRequestId();
  x.cpu_tokens = r.getCpuTokens();
  x.store_tokens = r.getStoreTokens();
  x.connector = str(r.getConnector());
  x.cpu_chunks = read_structs<kv_object>(r.getCpuChunks());
  x.cpu_state_positions = read_list<int32_t>(r.getCpuStatePositions());
  return x;
}

void to_capnp(const kv_object& x, wire::KvObject::Builder b) {
  b.setFirstBlock(x.first_block);
  b.setNumBlocks(x.num_blocks);
  b.setHash(x.hash);
}

kv_object from_capnp(wire::KvObject::Reader r) {
  kv_object x;
  x.first_block = r.getFirstBlock();
  x.num_blocks = r.getNumBlocks();
  x.hash = r.getHash();
  return x;
}

void to_capnp(const transfer_order& x, wire::TransferOrder::Builder b) {
  b.setRequestId(x.request_id);
  to_capnp(x.object, b.initObject());
}

transfer_order from_capnp(wire::TransferOrder::Reader r) {
  transfer_order x;
  x.request_id = r.getRequestId();
  x.object = from_capnp(r.getObject());
  return x;
}

void to_capnp(const transfer_result& x, wire::TransferResult::Builder b) {
  b.setRequestId(x.request_id);
  to_capnp(x.key, b.initKey());
  b.setIsSave(x.is_save);
  b.setOk(x.ok);
}

transfer_result from_capnp(wire::TransferResult::Reader r) {
  transfer_result x;
  x.request_id = r.getRequestId();
  x.key = from_capnp(r.getKey());
  x.is_save = r.getIsSave();
  x.ok = r.getOk();
  return x;
}

void to_capnp(const connector_step& x, wire::ConnectorStep::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_structs(b.initFinished(x.finished.size()), x.finished);
  fill_structs(b.initLoads(x.loads.size()), x.loads);
  fill_structs(b.initSaves(x.saves.size()), x.saves);
  b.setEvictAll(x.evict_all);
}

connector_step from_capnp(wire::ConnectorStep::Reader r) {
  connector_step x;
  x.header = from_capnp(r.getHeader());
  x.finished = read_structs<transfer_result>(r.getFinished());
  x.loads = read_structs<transfer_order>(r.getLoads());
  x.saves = read_structs<transfer_order>(r.getSaves());
  x.evict_all = r.getEvictAll();
  return x;
}

void to_capnp(const transfer_grant& x, wire::TransferGrant::Builder b) {
  b.setRequestId(x.request_id);
  to_capnp(x.key, b.initKey());
  b.setOk(x.ok);
  b.setStatus(text(x.status));
  b.setDataOffset(x.data_offset);
  b.setDataBytes(x.data_bytes);
}

transfer_grant from_capnp(wire::TransferGrant::Reader r) {
  transfer_grant x;
  x.request_id = r.getRequestId();
  x.key = from_capnp(r.getKey());
  x.ok = r.getOk();
  x.status = str(r.getStatus());
  x.data_offset = r.getDataOffset();
  x.data_bytes = r.getDataBytes();
  return x;
}

void to_capnp(const connector_step_done& x, wire::ConnectorStepDone::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_structs(b.initLoads(x.loads.size()), x.loads);
  fill_structs(b.initSaves(x.saves.size()), x.saves);
  to_capnp(x.stats, b.initStats());
  b.setNumEvicted(x.num_evicted);
}

connector_step_done from_capnp(wire::ConnectorStepDone::Reader r) {
  connector_step_done x;
  x.header = from_capnp(r.getHeader());
  x.loads = read_structs<transfer_grant>(r.getLoads());
  x.saves = read_structs<transfer_grant>(r.getSaves());
  x.stats = from_capnp(r.getStats());
  x.num_evicted = r.getNumEvicted();
  return x;
}

// --- store.hpp --------------------------------------------------------------------------------

void to_capnp(const object_key& x, wire::ObjectKey::Builder b) {
  b.setNamespaceId(x.namespace_id);
  b.setHash(x.hash);
  b.setKind(x.kind);
}

object_key from_capnp(wire::ObjectKey::Reader r) {
  object_key x;
  x.namespace_id = r.getNamespaceId();
  x.hash = r.getHash();
  x.kind = r.getKind();
  return x;
}

void to_capnp(const store_contains& x, wire::StoreContains::Builder b) {
  fill_structs(b.initKeys(x.keys.size()), x.keys);
}

store_contains from_capnp(wire::StoreContains::Reader r) {
  store_contains x;
  x.keys = read_structs<object_key>(r.getKeys());
  return x;
}

void to_capnp(const store_contains_done& x, wire::StoreContainsDone::Builder b) {
  b.setNumLeadingCommitted(x.num_leading_committed);
  fill_list(b.initPresent(x.present.size()), x.present);
}

store_contains_done from_capnp(wire::StoreContainsDone::Reader r) {
  store_contains_done x;
  x.num_leading_committed = r.getNumLeadingCommitted();
  x.present = read_list<uint8_t>(r.getPresent());
  return x;
}

void to_capnp(const store_stats& x, wire::StoreStats::Builder b) {
  b.setNumObjects(x.num_objects);
  b.setBytesUsed(x.bytes_used);
  b.setBytesCapacity(x.bytes_capacity);
  b.setCommitsTotal(x.commits_total);
  b.setEvictionsTotal(x.evictions_total);
  b.setPinsTotal(x.pins_total);
  b.setMissesTotal(x.misses_total);
  b.setChecksumFailuresTotal(x.checksum_failures_total);
  b.setHeaderFailuresTotal(x.header_failures_total);
  b.setRejectedTotal(x.rejected_total);
  b.setReservesTotal(x.reserves_total);
  b.setAbortsTotal(x.aborts_total);
}

store_stats from_capnp(wire::StoreStats::Reader r) {
  store_stats x;
  x.num_objects = r.getNumObjects();
  x.bytes_used = r.getBytesUsed();
  x.bytes_capacity = r.getBytesCapacity();
  x.commits_total = r.getCommitsTotal();
  x.evictions_total = r.getEvictionsTotal();
  x.pins_total = r.getPinsTotal();
  x.misses_total = r.getMissesTotal();
  x.checksum_failures_total = r.getChecksumFailuresTotal();
  x.header_failures_total = r.getHeaderFailuresTotal();
  x.rejected_total = r.getRejectedTotal();
  x.reserves_total = r.getReservesTotal();
  x.aborts_total = r.getAbortsTotal();
  return x;
}

void to_capnp(const object_ref& x, wire::ObjectRef::Builder b) {
  to_capnp(x.key, b.initKey());
  b.setFirstToken(x.first_token);
  b.setTokens(x.tokens);
  b.setNumBlocks(x.num_blocks);
  b.setDataBytes(x.data_bytes);
}

object_ref from_capnp(wire::ObjectRef::Reader r) {
  object_ref x;
  x.key = from_capnp(r.getKey());
  x.first_token = r.getFirstToken();
  x.tokens = r.getTokens();
  x.num_blocks = r.getNumBlocks();
  x.data_bytes = r.getDataBytes();
  return x;
}

void to_capnp(const store_grant& x, wire::StoreGrant::Builder b) {
  to_capnp(x.key, b.initKey());
  b.setOk(x.ok);
  b.setStatus(text(x.status));
  b.setDataOffset(x.data_offset);
  b.setDataBytes(x.data_bytes);
}

store_grant from_capnp(wire::StoreGrant::Reader r) {
  store_grant x;
  x.key = from_capnp(r.getKey());
  x.ok = r.getOk();
  x.status = str(r.getStatus());
  x.data_offset = r.getDataOffset();
  x.data_bytes = r.getDataBytes();
  return x;
}

void to_capnp(const store_step& x, wire::StoreStep::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_structs(b.initCommits(x.commits.size()), x.commits);
  fill_structs(b.initAborts(x.aborts.size()), x.aborts);
  fill_structs(b.initUnpins(x.unpins.size()), x.unpins);
  fill_structs(b.initPins(x.pins.size()), x.pins);
  fill_structs(b.initReserves(x.reserves.size()), x.reserves);
  b.setEvictAll(x.evict_all);
}

store_step from_capnp(wire::StoreStep::Reader r) {
  store_step x;
  x.header = from_capnp(r.getHeader());
  x.commits = read_structs<object_key>(r.getCommits());
  x.aborts = read_structs<object_key>(r.getAborts());
  x.unpins = read_structs<object_key>(r.getUnpins());
  x.pins = read_structs<object_ref>(r.getPins());
  x.reserves = read_structs<object_ref>(r.getReserves());
  x.evict_all = r.getEvictAll();
  return x;
}

void to_capnp(const store_step_done& x, wire::StoreStepDone::Builder b) {
  to_capnp(x.header, b.initHeader());
  fill_structs(b.initPins(x.pins.size()), x.pins);
  fill_structs(b.initReserves(x.reserves.size()), x.reserves);
  to_capnp(x.stats, b.initStats());
  b.setNumEvicted(x.num_evicted);
}

store_step_done from_capnp(wire::StoreStepDone::Reader r) {
  store_step_done x;
  x.header = from_capnp(r.getHeader());
  x.pins = read_structs<store_grant>(r.getPins());
  x.reserves = read_structs<store_grant>(r.getReserves());
  x.stats = from_capnp(r.getStats());
  x.num_evicted = r.getNumEvicted();
  return x;
}

void to_capnp(const store_corrupt& x, wire::StoreCorrupt::Builder b) {
  b.setKind(x.kind);
}

store_corrupt from_capnp(wire::StoreCorrupt::Reader r) {
  store_corrupt x;
  x.kind = r.getKind();
  return x;
}

// --- whole messages ---------------------------------------------------------------------------

template <class T>
std::vector<uint8_t> encode_message(const T& x) {
  capnp::MallocMessageBuilder builder;
  to_capnp(x, builder.initRoot<typename wire_type<T>::type>());
  auto words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

template <class T>
T decode_message(const std::vector<uint8_t>& bytes) {
  const std::string what = std::string("decode_message<") + wire_type<T>::name + ">: ";
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    throw std::runtime_error(what + "length " + std::to_string(bytes.size()) +
                             " is not a positive multiple of 8 bytes");
  // Copy into word-aligned storage: a std::vector<uint8_t> buffer carries no alignment promise.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    // A legitimate message reads each word once; the bound stops a few garbage bytes from
    // claiming a huge list of empty structs (capnp charges each element one word).
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 2 * words.size() + 64;
    capnp::FlatArrayMessageReader reader(words, options);
    if (reader.getEnd() != words.end())
      throw std::runtime_error(what + "trailing bytes after the message (" +
                               std::to_string((words.end() - reader.getEnd()) * 8) + " bytes)");
    // Reading every field here makes out-of-bounds pointers throw inside this try block.
    return from_capnp(reader.getRoot<typename wire_type<T>::type>());
  } catch (const kj::Exception& e) {
    throw std::runtime_error(what + "malformed Cap'n Proto message: " +
                             std::string(e.getDescription().cStr()));
  }
}

#define ORDO_INSTANTIATE(T)                                                                      \
  template std::vector<uint8_t> encode_message<T>(const T&);                                     \
  template T decode_message<T>(const std::vector<uint8_t>&);

ORDO_INSTANTIATE(command_header)
ORDO_INSTANTIATE(completion_request)
ORDO_INSTANTIATE(completion_chunk)
ORDO_INSTANTIATE(completion_result)
ORDO_INSTANTIATE(completion_failed)
ORDO_INSTANTIATE(cancel_request)
ORDO_INSTANTIATE(evict_request)
ORDO_INSTANTIATE(stop_sequence)
ORDO_INSTANTIATE(evict_result)
ORDO_INSTANTIATE(media_span)
ORDO_INSTANTIATE(scheduled_request)
ORDO_INSTANTIATE(step_plan)
ORDO_INSTANTIATE(sampled_token)
ORDO_INSTANTIATE(step_done)
ORDO_INSTANTIATE(state_image_copy)
ORDO_INSTANTIATE(unit_transfer)
ORDO_INSTANTIATE(block_commit)
ORDO_INSTANTIATE(block_grow)
ORDO_INSTANTIATE(pool_step)
ORDO_INSTANTIATE(grow_result)
ORDO_INSTANTIATE(pool_step_done)
ORDO_INSTANTIATE(checkpoint_position)
ORDO_INSTANTIATE(reserved_image)
ORDO_INSTANTIATE(image_unpin)
ORDO_INSTANTIATE(connector_lookup)
ORDO_INSTANTIATE(connector_lookup_done)
ORDO_INSTANTIATE(kv_object)
ORDO_INSTANTIATE(transfer_order)
ORDO_INSTANTIATE(transfer_result)
ORDO_INSTANTIATE(connector_step)
ORDO_INSTANTIATE(transfer_grant)
ORDO_INSTANTIATE(connector_step_done)
ORDO_INSTANTIATE(object_key)
ORDO_INSTANTIATE(store_contains)
ORDO_INSTANTIATE(store_contains_done)
ORDO_INSTANTIATE(store_stats)
ORDO_INSTANTIATE(object_ref)
ORDO_INSTANTIATE(store_grant)
ORDO_INSTANTIATE(store_step)
ORDO_INSTANTIATE(store_step_done)
ORDO_INSTANTIATE(store_corrupt)

#undef ORDO_INSTANTIATE

} // namespace ordo
