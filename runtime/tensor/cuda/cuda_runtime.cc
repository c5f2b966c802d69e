#include "runtime/tensor/cuda/cuda_runtime.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::cuda {
namespace {

absl::Status CudaError(cudaError_t e, const char* what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

struct DeviceFree {
  void operator()(float* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<float, DeviceFree>;

absl::StatusOr<DeviceBuffer> Upload(const float* host, size_t count) {
  float* p = nullptr;
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(float));
      e != cudaSuccess) {
    return CudaError(e, "cudaMalloc");
  }
  DeviceBuffer buf(p);
  if (cudaError_t e = cudaMemcpy(p, host, count * sizeof(float), cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return CudaError(e, "cudaMemcpy to device");
  }
  return buf;
}

// nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string UuidString(const cudaUUID_t& uuid) {
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    absl::StrAppend(&out, absl::Hex(static_cast<unsigned char>(uuid.bytes[i]), absl::kZeroPad2));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> ListCudaDevices() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return CudaError(e, "no usable CUDA device");
  }
  if (count == 0) return absl::UnavailableError("the CUDA driver reports no GPU");
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      return CudaError(e, "cudaGetDeviceProperties");
    }
    DeviceInfo d;
    d.kind = DeviceKind::kCuda;
    d.index = i;
    d.name = prop.name;
    d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    d.cores = prop.multiProcessorCount;
    d.uuid = UuidString(prop.uuid);
    out.push_back(d);
  }
  return out;
}

absl::Status GemmOnDevice(int device, Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
                          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float beta, float* c, int64_t ldc) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
  const int64_t a_rows = trans_a == Trans::kNo ? m : k;
  const int64_t b_rows = trans_b == Trans::kNo ? k : n;
  absl::StatusOr<DeviceBuffer> da = Upload(a, static_cast<size_t>(a_rows * lda));
  if (!da.ok()) return da.status();
  absl::StatusOr<DeviceBuffer> db = Upload(b, static_cast<size_t>(b_rows * ldb));
  if (!db.ok()) return db.status();
  absl::StatusOr<DeviceBuffer> dc = Upload(c, static_cast<size_t>(m * ldc));
  if (!dc.ok()) return dc.status();
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    return absl::UnavailableError("cublasCreate failed");
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap
  // the operands and keep each one's transposition flag.
  const cublasOperation_t ta = trans_a == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasStatus_t st =
      cublasSgemm(handle, tb, ta, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                  &alpha, db->get(), static_cast<int>(ldb), da->get(), static_cast<int>(lda), &beta,
                  dc->get(), static_cast<int>(ldc));
  cublasDestroy(handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cublasSgemm failed with status ", static_cast<int>(st)));
  }
  if (cudaError_t e = cudaMemcpy(c, dc->get(), static_cast<size_t>(m * ldc) * sizeof(float),
                                 cudaMemcpyDeviceToHost);
      e != cudaSuccess) {
    return CudaError(e, "cudaMemcpy to host");
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::cuda
