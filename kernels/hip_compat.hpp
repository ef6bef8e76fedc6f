// The one GPU seam (DESIGN §2.2): kernels and the HIP device are written against the HIP names
// below. On AMD (hipcc) they are HIP itself; on NVIDIA (nvcc) they map onto the CUDA runtime,
// because Debian's HIP headers are too old for CUDA 13. The only file that includes a GPU runtime
// header, and the only place with a vendor #if.
#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define ORDO_GPU_VENDOR "amd"
#define ORDO_WARP_SIZE 64
// HIP's shuffles take no mask; the project always shuffles whole warps.
#define ORDO_SHFL_XOR(v, m) __shfl_xor((v), (m))
#define ORDO_DEVICE_TRAP() abort()
// gfx90a's matrix cores have no TF32 operands: device.matmul = "tf32" is refused on AMD.
#define ORDO_HAS_TF32_MMA 0
// The bf16 kernel (kernels/hip/matmul_bf16.hip) is written against the WMMA API, which HIP on
// gfx90a lacks: model.weight_dtype = "bf16" is refused on AMD.
#define ORDO_HAS_BF16_MMA 0
#else
#include <cuda_runtime.h>
#define ORDO_GPU_VENDOR "nvidia"
#define ORDO_WARP_SIZE 32
#define ORDO_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define ORDO_DEVICE_TRAP() __trap()
// Hopper's tensor cores through the WMMA API: 16×16×8 TF32 tiles with fp32 accumulators,
// and 16×16×16 bf16 tiles (model.weight_dtype = "bf16").
#include <cuda_bf16.h>
#include <mma.h>
#define ORDO_HAS_TF32_MMA 1
#define ORDO_HAS_BF16_MMA 1
// Only the matrix-unit kernels (NVIDIA) use these: more than 48 KiB of dynamic shared memory.
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipHostFn_t = cudaHostFn_t;

#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipMemcpyDefault cudaMemcpyDefault
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDisableTiming cudaEventDisableTiming
#define hipHostMallocDefault cudaHostAllocDefault
#define hipHostMallocPortable cudaHostAllocPortable
#define hipHostMallocMapped cudaHostAllocMapped
#define hipHostRegisterMapped cudaHostRegisterMapped
#define hipHostRegisterPortable cudaHostRegisterPortable

#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipSetDevice cudaSetDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc cudaHostAlloc
#define hipHostFree cudaFreeHost
#define hipHostRegister cudaHostRegister
#define hipHostUnregister cudaHostUnregister
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamCreateWithPriority cudaStreamCreateWithPriority
#define hipDeviceGetStreamPriorityRange cudaDeviceGetStreamPriorityRange
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipGetDevice cudaGetDevice
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventQuery cudaEventQuery
#define hipEventSynchronize cudaEventSynchronize
#define hipLaunchHostFunc cudaLaunchHostFunc
#endif

#include <cstdio>
#include <cstdlib>

// Aborts with the failing call: a device error leaves the runner in an unknown state.
#define ORDO_HIP_CHECK(call)                                                                  \
  do {                                                                                        \
    const hipError_t ordo_err_ = (call);                                                      \
    if (ordo_err_ != hipSuccess) {                                                            \
      std::fprintf(stderr, "ordo hip: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,   \
                   hipGetErrorString(ordo_err_));                                             \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
