// The HIP device (DESIGN §2.2): three non-blocking streams, events recorded on them, device and
// pinned host memory, host callbacks run on a device-owned thread, and the kernel table that
// launches kernels/hip. Registered with runtime/device_registry at static-init time.
// Thread safety: every method may be called from any thread (the runner's, a CAF worker's).
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>

#include "kernels/hip/launch.hpp"
#include "kernels/kernel_table.hpp"
#include "runtime/device_registry.hpp"

namespace ordo {

namespace hip {

void* device_scratch::reserve(size_t need, hipStream_t stream) {
  if (need <= bytes)
    return ptr;
  ORDO_HIP_CHECK(hipStreamSynchronize(stream)); // the stream's earlier kernels may still use the old one
  release();
  const size_t mib = size_t(1) << 20;
  const size_t grown = (need + mib - 1) / mib * mib;
  ORDO_HIP_CHECK(hipMalloc(&ptr, grown));
  bytes = grown;
  return ptr;
}

void device_scratch::release() {
  if (ptr)
    ORDO_HIP_CHECK(hipFree(ptr));
  ptr = nullptr;
  bytes = 0;
}

} // namespace hip

namespace {

class hip_device final : public device {
public:
  explicit hip_device(int ordinal) : ordinal_(ordinal) {
    ORDO_HIP_CHECK(hipSetDevice(ordinal_));
    hipDeviceProp_t prop;
    ORDO_HIP_CHECK(hipGetDeviceProperties(&prop, ordinal_));
    name_ = std::string("hip-") + ORDO_GPU_VENDOR + ":" + std::to_string(ordinal_) + " (" + prop.name + ")";
    // The compute stream gets the greatest priority: while a save's gather and a step's forward
    // both have blocks waiting, the block scheduler starts the forward's first
    // (docs/architecture.md §3).
    int least = 0, greatest = 0;
    ORDO_HIP_CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
    for (int k = 0; k < num_stream_kinds; ++k)
      ORDO_HIP_CHECK(hipStreamCreateWithPriority(&streams_[k], hipStreamNonBlocking,
                                                 static_cast<stream_kind>(k) == stream_kind::compute ? greatest : least));
    callback_thread_ = std::thread([this] { run_callbacks(); });
  }

  ~hip_device() override {
    bind();
    (void)hipDeviceSynchronize();
    {
      std::lock_guard<std::mutex> lock(callback_mutex_);
      stopping_ = true;
    }
    callback_cv_.notify_all();
    callback_thread_.join();
    for (auto& e : events_) (void)hipEventDestroy(e.second);
    for (hipStream_t s : streams_) {
      hip::release_save_staging(s);
      (void)hipStreamDestroy(s);
    }
  }

  std::string name() const override { return name_; }

  // Makes this device current on the calling thread (CUDA/HIP keep the current device per thread).
  void bind() const { ORDO_HIP_CHECK(hipSetDevice(ordinal_)); }
  hipStream_t stream(stream_kind s) const { return streams_[static_cast<int>(s)]; }

  void* alloc_device(size_t bytes) override {
    bind();
    void* p = nullptr;
    ORDO_HIP_CHECK(hipMalloc(&p, bytes ? bytes : 1));
    // NOTE(zero-fill-order): hipMemset runs on the legacy default stream, which does not order
    // against this device's non-blocking streams: without waiting here, a copy queued next on
    // the load stream (the model's weights) could land first and be zeroed after it. Seen on the
    // H200 with three nodes sharing the GPU: zero weights, the same logits for every prompt.
    ORDO_HIP_CHECK(hipMemset(p, 0, bytes ? bytes : 1));
    ORDO_HIP_CHECK(hipDeviceSynchronize());
    return p;
  }
  void free_device(void* ptr) override {
    bind();
    if (ptr) ORDO_HIP_CHECK(hipFree(ptr));
  }
  // Mapped as well as page-locked: a gather kernel can write host pages directly (DESIGN §2.2).
  void* alloc_host_pinned(size_t bytes) override {
    bind();
    void* p = nullptr;
    ORDO_HIP_CHECK(hipHostMalloc(&p, bytes ? bytes : 1, hipHostMallocPortable | hipHostMallocMapped));
    std::memset(p, 0, bytes ? bytes : 1);
    return p;
  }
  void free_host_pinned(void* ptr) override {
    bind();
    if (ptr) ORDO_HIP_CHECK(hipHostFree(ptr));
  }
  // Another process's shared mapping (a store server's arena), pinned and mapped once per attach;
  // kernels address it through the host pointer, so the device pointer must equal it (UVA).
  void register_host(void* ptr, size_t bytes) override {
    bind();
    ORDO_HIP_CHECK(hipHostRegister(ptr, bytes, hipHostRegisterMapped | hipHostRegisterPortable));
    void* dptr = nullptr;
    ORDO_HIP_CHECK(hipHostGetDevicePointer(&dptr, ptr, 0));
    if (dptr != ptr) {
      (void)hipHostUnregister(ptr); // the error below is the one to report
      throw std::runtime_error("registered host memory is mapped at another device address; this GPU cannot "
                               "address a store arena through its host pointer");
    }
  }
  void unregister_host(void* ptr) override {
    bind();
    if (ptr) ORDO_HIP_CHECK(hipHostUnregister(ptr));
  }

  void copy_async(stream_kind s, void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    bind();
    ORDO_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, stream(s)));
  }
  void fill_async(stream_kind s, void* dst, uint8_t value, size_t bytes) override {
    if (bytes == 0) return;
    bind();
    ORDO_HIP_CHECK(hipMemsetAsync(dst, value, bytes, stream(s)));
  }

  event_id record(stream_kind s) override {
    bind();
    hipEvent_t e;
    ORDO_HIP_CHECK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
    ORDO_HIP_CHECK(hipEventRecord(e, stream(s)));
    std::lock_guard<std::mutex> lock(events_mutex_);
    const event_id id = ++last_event_;
    events_.emplace(id, e);
    if (events_.size() > 4096) sweep_completed();
    return id;
  }

  // An id no longer in the table completed earlier (query or the sweep released it).
  void wait(stream_kind s, event_id id) override {
    bind();
    std::lock_guard<std::mutex> lock(events_mutex_);
    auto it = events_.find(id);
    if (it == events_.end()) {
      if (id == 0 || id > last_event_) throw std::invalid_argument("hip device: wait on unknown event");
      return;
    }
    ORDO_HIP_CHECK(hipStreamWaitEvent(stream(s), it->second, 0));
  }

  bool query(event_id id) override {
    bind();
    std::lock_guard<std::mutex> lock(events_mutex_);
    auto it = events_.find(id);
    if (it == events_.end()) {
      if (id == 0 || id > last_event_) throw std::invalid_argument("hip device: query of unknown event");
      return true;
    }
    const hipError_t r = hipEventQuery(it->second);
    if (r == hipErrorNotReady) return false;
    ORDO_HIP_CHECK(r);
    ORDO_HIP_CHECK(hipEventDestroy(it->second));
    events_.erase(it);
    return true;
  }

  // The stream's host function hands `fn` to this device's callback thread and waits for it, so
  // `fn` may itself enqueue device work (a host function may not call the runtime API) while
  // later work on the stream still waits for `fn` to return.
  void host_callback(stream_kind s, std::function<void()> fn) override {
    bind();
    auto* job = new callback_job{this, std::move(fn)};
    ORDO_HIP_CHECK(hipLaunchHostFunc(stream(s), &hip_device::on_stream, job));
  }

  void synchronize() override {
    bind();
    ORDO_HIP_CHECK(hipDeviceSynchronize());
  }

private:
  struct callback_job {
    hip_device* dev;
    std::function<void()> fn;
    bool done = false;
  };

  static void on_stream(void* p) {
    auto* job = static_cast<callback_job*>(p);
    hip_device* dev = job->dev;
    std::unique_lock<std::mutex> lock(dev->callback_mutex_);
    dev->callback_queue_.push_back(job);
    dev->callback_cv_.notify_all();
    dev->callback_cv_.wait(lock, [job] { return job->done; });
    lock.unlock();
    delete job;
  }

  void run_callbacks() {
    bind();
    std::unique_lock<std::mutex> lock(callback_mutex_);
    for (;;) {
      callback_cv_.wait(lock, [this] { return stopping_ || !callback_queue_.empty(); });
      if (callback_queue_.empty()) return;
      callback_job* job = callback_queue_.front();
      callback_queue_.pop_front();
      lock.unlock();
      job->fn();
      lock.lock();
      job->done = true;
      callback_cv_.notify_all();
    }
  }

  // Caller holds events_mutex_.
  void sweep_completed() {
    for (auto it = events_.begin(); it != events_.end();) {
      if (hipEventQuery(it->second) == hipSuccess) {
        (void)hipEventDestroy(it->second);
        it = events_.erase(it);
      } else {
        ++it;
      }
    }
    (void)hipGetLastError(); // a not-ready query leaves no error behind
  }

  int ordinal_;
  std::string name_;
  hipStream_t streams_[num_stream_kinds] = {};
  std::mutex events_mutex_;
  std::unordered_map<event_id, hipEvent_t> events_;
  event_id last_event_ = 0;
  std::mutex callback_mutex_;
  std::condition_variable callback_cv_;
  std::deque<callback_job*> callback_queue_;
  bool stopping_ = false;
  std::thread callback_thread_;

  friend class hip_kernel_table;
};

class hip_kernel_table final : public kernel_table {
public:
  hip_kernel_table(hip_device& dev, const kernel_options& options) : dev_(dev), options_(options) {}
  ~hip_kernel_table() override {
    dev_.bind();
    for (auto& s : scratch_) s.release();
  }

  void matmul(stream_kind s, const matmul_args& a) override {
    dev_.bind();
    if (a.w_bf16 != nullptr)
      hip::matmul_bf16(a, dev_.stream(s), scratch_[static_cast<size_t>(s)]);
    else if (options_.matmul == matmul_mode::tf32)
      hip::matmul_tf32(a, dev_.stream(s));
    else
      hip::matmul(a, dev_.stream(s));
  }
  void matmul_swiglu(stream_kind s, const matmul_args& mm, const swiglu_args& sw) override {
    dev_.bind();
    const bool exact = mm.w_bf16 == nullptr && options_.matmul == matmul_mode::exact;
    if (exact && hip::matmul_swiglu(mm, sw, dev_.stream(s))) return;
    matmul(s, mm);
    hip::swiglu(sw, dev_.stream(s));
  }

#define ORDO_HIP_OP(op, args_t)                \
  void op(stream_kind s, const args_t& a) override { \
    dev_.bind();                               \
    hip::op(a, dev_.stream(s));                \
  }
  ORDO_HIP_OP(rmsnorm, rmsnorm_args)
  ORDO_HIP_OP(output_gate, output_gate_args)
  ORDO_HIP_OP(embed, embed_args)
  ORDO_HIP_OP(rope, rope_args)
  ORDO_HIP_OP(swiglu, swiglu_args)
  ORDO_HIP_OP(kv_store, kv_store_args)
  ORDO_HIP_OP(rope_kv_store, rope_kv_store_args)
  ORDO_HIP_OP(paged_attention, paged_attention_args)
  ORDO_HIP_OP(index_compress, index_compress_args)
  ORDO_HIP_OP(sparse_attention, sparse_attention_args)
  ORDO_HIP_OP(state_reset, state_reset_args)
  ORDO_HIP_OP(causal_conv, causal_conv_args)
  ORDO_HIP_OP(gdn, gdn_args)
  ORDO_HIP_OP(ple_ngram, ple_ngram_args)
  ORDO_HIP_OP(gather_rows, gather_rows_args)
  ORDO_HIP_OP(sample, sample_args)
  ORDO_HIP_OP(unit_copy, unit_copy_args)
#undef ORDO_HIP_OP
  void unit_copy_batch(stream_kind s, const unit_copy_args* a, size_t n) override {
    dev_.bind();
    hip::unit_copy_batch(a, n, dev_.stream(s));
  }

private:
  hip_device& dev_;
  kernel_options options_;
  hip::device_scratch scratch_[3]; // per stream_kind (compute, load, save)
};

int count_devices() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return n;
}

const bool registered = register_gpu_backend(
    {std::string("hip-") + ORDO_GPU_VENDOR, count_devices,
     [](int ordinal) -> std::unique_ptr<device> { return std::make_unique<hip_device>(ordinal); },
     [](device& dev, const kernel_options& options) -> std::unique_ptr<kernel_table> {
       auto* hd = dynamic_cast<hip_device*>(&dev);
       if (!hd) return nullptr;
       if (options.matmul == matmul_mode::tf32 && !hip::has_tf32_matmul())
         throw std::invalid_argument(std::string("device.matmul = \"tf32\": ") + dev.name() +
                                     " (hip-" ORDO_GPU_VENDOR ") has no TF32 matrix units in this build; use \"exact\"");
       if (options.weights == weight_dtype::bf16 && !hip::has_bf16_matmul())
         throw std::invalid_argument(std::string("model.weight_dtype = \"bf16\": ") + dev.name() +
                                     " (hip-" ORDO_GPU_VENDOR ") has no bf16 matmul in this build; use \"fp32\"");
       return std::make_unique<hip_kernel_table>(*hd, options);
     }});

} // namespace
} // namespace ordo
