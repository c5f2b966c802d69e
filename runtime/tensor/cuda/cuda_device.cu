#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/tensor/cuda/cuda_device.h"
#include "runtime/tensor/kernels/dropout_mask.h"
#include "runtime/tensor/kernels/im2col.h"
#include "runtime/tensor/kernels/max_pool.h"
#include "runtime/tensor/kernels/optimizer_update.h"
#include "runtime/tensor/kernels/relu.h"
#include "runtime/tensor/kernels/rows.h"
#include "runtime/tensor/kernels/softmax_cross_entropy.h"

namespace kubetrain::cuda {
namespace {

constexpr int kThreads = 256;

// The launch wrapper: one thread per index of [0, n), each running the
// host/device kernel over its one-element range.
template <typename F>
__global__ void ForEachIndex(int64_t n, F f) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

// The batch's loss in one block: each thread takes rows t, t + 256, ...,
// then a fixed tree adds the threads' sums, so the result is the same on
// every run (no atomics), and sums[] gets one add each.
constexpr int kLossThreads = 256;
__global__ void SoftmaxCrossEntropySumKernel(const float* logits, int64_t n, int64_t k,
                                             const int32_t* labels, float* grad, double* sums) {
  __shared__ double loss_part[kLossThreads];
  __shared__ double correct_part[kLossThreads];
  const int t = static_cast<int>(threadIdx.x);
  double loss = 0, correct = 0;
  for (int64_t i = t; i < n; i += kLossThreads) {
    bool ok = false;
    loss += kernels::SoftmaxCrossEntropyRow(logits + i * k, k, labels[i], static_cast<double>(n),
                                            grad == nullptr ? nullptr : grad + i * k, &ok);
    correct += ok ? 1.0 : 0.0;
  }
  loss_part[t] = loss;
  correct_part[t] = correct;
  __syncthreads();
  for (int s = kLossThreads / 2; s > 0; s /= 2) {
    if (t < s) {
      loss_part[t] += loss_part[t + s];
      correct_part[t] += correct_part[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    sums[0] += loss_part[0];
    sums[1] += correct_part[0];
  }
}

void FreeDevice(void* p) { cudaFree(p); }
void FreePinned(void* p) { cudaFreeHost(p); }

// A CUDA event on one device's stream (device_event.h).
class CudaEvent final : public DeviceEvent {
 public:
  CudaEvent(int device, cudaStream_t stream, cudaEvent_t event)
      : device_(device), stream_(stream), event_(event) {}
  ~CudaEvent() override {
    cudaSetDevice(device_);
    cudaEventDestroy(event_);
  }
  void Record() override {
    cudaSetDevice(device_);
    recorded_ = cudaEventRecord(event_, stream_);
  }
  bool Done() override {
    cudaSetDevice(device_);
    const cudaError_t q = cudaEventQuery(event_);
    // Not ready is not an error: clear it, or this thread's next launch
    // check (cudaGetLastError) would report it.
    if (q == cudaErrorNotReady) (void)cudaGetLastError();
    return q != cudaErrorNotReady;
  }
  absl::Status Wait() override {
    // The waiting thread may be one that never used this GPU.
    cudaSetDevice(device_);
    cudaError_t e = recorded_;
    if (e == cudaSuccess) e = cudaEventSynchronize(event_);
    if (e != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat("cuda:", device_, ": waiting for queued work: ", cudaGetErrorString(e)));
    }
    return absl::OkStatus();
  }

 private:
  const int device_;
  const cudaStream_t stream_;
  const cudaEvent_t event_;
  cudaError_t recorded_ = cudaSuccess;
};

// Dense layers' GEMMs with their bias (and ReLU) fused into cuBLASLt's
// epilogue: the forward y = relu(x w^T + b) is one kernel instead of a
// broadcast, a GEMM and a ReLU; the backward's dW GEMM also sums the bias
// gradient (BGRADB) instead of a second GEMM against a vector of ones.
// Row-major matrices are cuBLAS's column-major transposes, as in Gemm:
//   forward   y^T{units, batch} = op_T(w as {inputs, units}) . x^T{inputs, batch}
//   backward  dW^T{inputs, units} = x^T{inputs, batch} . op_T(dY^T{units, batch}),
//             db{units} = the sum of dY over the batch (the k dimension)
// One plan per shape (and epilogue), its algorithm from cuBLASLt's
// heuristic; a shape with no algorithm is remembered as such and takes the
// composed path. Not thread-safe (its device's).
class LtDense {
 public:
  enum class Kind { kForward, kForwardRelu, kWeightsAndBias };

  explicit LtDense(cublasLtHandle_t handle) : handle_(handle) {}
  ~LtDense() {
    for (auto& [key, plan] : plans_) Destroy(plan);
    if (handle_ != nullptr) cublasLtDestroy(handle_);
  }

  // Queues the GEMM: forward (a = w, b = x, c = y, bias = b) or backward
  // (a = x, b = gy, c = dw, bias = db, written). False when cuBLASLt has no
  // algorithm for it: nothing was queued.
  bool Run(Kind kind, bool tf32, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
           float* c, float* bias, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    Plan& plan = Find(kind, tf32, m, n, k, workspace_bytes);
    if (!plan.ok) return false;
    if (cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                       sizeof(bias)) != CUBLAS_STATUS_SUCCESS) {
      return false;
    }
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(handle_, plan.desc, &one, a, plan.a, b, plan.b, &zero, c, plan.c, c,
                          plan.c, &plan.algo, workspace, workspace_bytes,
                          stream) == CUBLAS_STATUS_SUCCESS;
  }

 private:
  struct Plan {
    bool ok = false;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };

  static void Destroy(Plan& p) {
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
    for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
  }

  Plan& Find(Kind kind, bool tf32, int64_t m, int64_t n, int64_t k, size_t workspace_bytes) {
    const auto key = std::make_tuple(static_cast<int>(kind), tf32, m, n, k);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    Plan& p = plans_[key];
    const bool forward = kind != Kind::kWeightsAndBias;
    // Forward: A = w^T stored {k = inputs, m = units}; backward: A = x^T
    // stored {m = inputs, k = batch}. B: x^T {k, n = batch}; dY^T stored
    // {n = units, k = batch}.
    const cublasOperation_t ta = forward ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = forward ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cublasLtEpilogue_t epilogue = kind == Kind::kForward       ? CUBLASLT_EPILOGUE_BIAS
                                        : kind == Kind::kForwardRelu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                                     : CUBLASLT_EPILOGUE_BGRADB;
    bool ok =
        cublasLtMatmulDescCreate(&p.desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                 CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                              sizeof(ta)) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                              sizeof(tb)) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS;
    const uint64_t a_rows = forward ? k : m, a_cols = forward ? m : k;
    const uint64_t b_rows = forward ? k : n, b_cols = forward ? n : k;
    ok = ok && cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, a_rows, a_cols,
                                          static_cast<int64_t>(a_rows)) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, b_rows, b_cols,
                                          static_cast<int64_t>(b_rows)) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, m) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreference_t pref = nullptr;
    ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)) ==
                   CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    ok = ok &&
         cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result,
                                        &found) == CUBLAS_STATUS_SUCCESS &&
         found > 0;
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (ok) {
      p.algo = result.algo;
      p.ok = true;
    } else {
      Destroy(p);
      p = Plan{};
    }
    return p;
  }

  cublasLtHandle_t handle_;
  std::map<std::tuple<int, bool, int64_t, int64_t, int64_t>, Plan> plans_;
};

class CudaDevice;

// An instantiated CUDA graph, launched on its device's stream.
class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(CudaDevice* device, cudaGraphExec_t exec) : device_(device), exec_(exec) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  absl::Status Replay() override;

 private:
  CudaDevice* device_;
  cudaGraphExec_t exec_;
};

class CudaDevice final : public ComputeDevice {
 public:
  CudaDevice(const DeviceInfo& info, cudaStream_t stream, cublasHandle_t blas,
             DeviceBuffer blas_workspace, std::unique_ptr<LtDense> lt, bool tf32)
      : info_(info),
        stream_(stream),
        blas_(blas),
        blas_workspace_(std::move(blas_workspace)),
        lt_(std::move(lt)),
        tf32_(tf32) {}
  ~CudaDevice() override {
    Current();
    cudaStreamSynchronize(stream_);
    ones_ = DeviceBuffer();
    scratch_ = DeviceBuffer();
    cublasDestroy(blas_);
    lt_.reset();
    blas_workspace_ = DeviceBuffer();
    cudaStreamDestroy(stream_);
  }

  const DeviceInfo& info() const override { return info_; }
  bool host_memory() const override { return false; }

  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) override {
    Current();
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1)); e != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky: clear it
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes on ",
                                                       info_.Id(), ": ", cudaGetErrorString(e)));
    }
    return DeviceBuffer(p, bytes, &FreeDevice);
  }

  absl::StatusOr<DeviceBuffer> AllocatePinnedHost(size_t bytes) override {
    void* p = nullptr;
    if (cudaError_t e = cudaMallocHost(&p, std::max<size_t>(bytes, 1)); e != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", bytes, " bytes of pinned host memory: ", cudaGetErrorString(e)));
    }
    return DeviceBuffer(p, bytes, &FreePinned);
  }

  DeviceMemory Memory() override {
    size_t free = 0, total = 0;
    DeviceMemory m;
    Current();
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
      m.total_bytes = static_cast<int64_t>(total);
      m.free_bytes = static_cast<int64_t>(free);
    }
    return m;
  }

  void CopyToDevice(const void* host, void* device, size_t bytes) override {
    if (bytes == 0) return;
    Current();
    Note(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "copy to device");
    // The host buffer may change as soon as this returns.
    Note(cudaStreamSynchronize(stream_), "copy to device");
  }

  absl::Status CopyToHost(const void* device, void* host, size_t bytes) override {
    Current();
    if (bytes > 0) {
      Note(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
    }
    return Synchronize();
  }

  void CopyToHostAsync(const void* device, void* host, size_t bytes) override {
    if (bytes == 0) return;
    Current();
    Note(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_),
         "queued copy to host");
  }

  void CopyToDeviceAsync(const void* host, void* device, size_t bytes) override {
    if (bytes == 0) return;
    Current();
    Note(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
         "queued copy to device");
  }

  absl::StatusOr<std::unique_ptr<DeviceEvent>> NewEvent() override {
    Current();
    cudaEvent_t e = nullptr;
    if (cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming); r != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat(info_.Id(), ": cudaEventCreate: ", cudaGetErrorString(r)));
    }
    return std::unique_ptr<DeviceEvent>(new CudaEvent(info_.index, stream_, e));
  }

  void* native_queue() override { return stream_; }

  void Copy(const float* src, float* dst, int64_t n) override {
    if (n <= 0 || src == dst) return;
    Current();
    Note(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                         stream_),
         "copy");
  }

  void Fill(float* x, int64_t n, float value) override {
    Launch(n, [=] __device__(int64_t i) { x[i] = value; });
  }

  absl::Status Synchronize() override {
    Current();
    Note(cudaStreamSynchronize(stream_), "stream");
    return error_;
  }

  void Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) override {
    if (m <= 0 || n <= 0) return;
    Current();
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
    const cublasOperation_t ta = trans_a == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = trans_b == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasStatus_t st = cublasSgemm(blas_, tb, ta, static_cast<int>(n), static_cast<int>(m),
                                          static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a,
                                          static_cast<int>(lda), &beta, c, static_cast<int>(ldc));
    if (st != CUBLAS_STATUS_SUCCESS) {
      error_.Update(absl::InternalError(absl::StrCat(
          "cublasSgemm on ", info_.Id(), " failed with status ", static_cast<int>(st))));
    }
  }

  void DenseForward(const DenseShape& s, const float* x, const float* w, const float* bias,
                    float* y) override {
    Current();
    const LtDense::Kind kind = s.relu ? LtDense::Kind::kForwardRelu : LtDense::Kind::kForward;
    if (lt_ == nullptr || s.batch <= 0 ||
        !lt_->Run(kind, tf32_, s.units, s.batch, s.inputs, w, x, y, const_cast<float*>(bias),
                  blas_workspace_.data(), blas_workspace_.bytes(), stream_)) {
      ComputeDevice::DenseForward(s, x, w, bias, y);
    }
  }

  void DenseBackward(const DenseShape& s, const float* x, const float* w, const float* y,
                     const float* gy, float* masked, float* dw, float* db, float* dx) override {
    Current();
    if (lt_ == nullptr || s.batch <= 0) {
      ComputeDevice::DenseBackward(s, x, w, y, gy, masked, dw, db, dx);
      return;
    }
    if (s.relu) {
      ReluBackward(y, gy, masked, s.batch * s.units);
      gy = masked;
    }
    // dW and db in one GEMM; dX as before.
    if (!lt_->Run(LtDense::Kind::kWeightsAndBias, tf32_, s.inputs, s.units, s.batch, x, gy, dw, db,
                  blas_workspace_.data(), blas_workspace_.bytes(), stream_)) {
      Gemm(Trans::kYes, Trans::kNo, s.units, s.inputs, s.batch, 1.0f, gy, s.units, x, s.inputs,
           0.0f, dw, s.inputs);
      SumRows(gy, s.batch, s.units, db);
    }
    if (dx != nullptr) {
      Gemm(Trans::kNo, Trans::kNo, s.batch, s.inputs, s.units, 1.0f, gy, s.units, w, s.inputs, 0.0f,
           dx, s.inputs);
    }
  }

  void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y) override {
    Launch(rows * cols,
           [=] __device__(int64_t i) { kernels::BroadcastRows(i, i + 1, row, cols, y); });
  }

  void SumRows(const float* x, int64_t rows, int64_t cols, float* out) override {
    // out{1, cols} = ones{1, rows} * x{rows, cols}: cuBLAS's reduction.
    if (absl::Status s = EnsureOnes(rows); !s.ok()) {
      error_.Update(s);
      return;
    }
    Gemm(Trans::kNo, Trans::kNo, 1, cols, rows, 1.0f, ones_.data(), rows, x, cols, 0.0f, out, cols);
  }

  void Multiply(const float* a, const float* b, float* y, int64_t n) override {
    Launch(n, [=] __device__(int64_t i) { kernels::Multiply(i, i + 1, a, b, y); });
  }

  void Scale(float* x, int64_t n, float s) override {
    Launch(n, [=] __device__(int64_t i) { kernels::Scale(i, i + 1, s, x); });
  }

  void ReluForward(const float* x, float* y, int64_t n) override {
    Launch(n, [=] __device__(int64_t i) { kernels::ReluForward(i, i + 1, x, y); });
  }

  void ReluBackward(const float* x, const float* gy, float* gx, int64_t n) override {
    Launch(n, [=] __device__(int64_t i) { kernels::ReluBackward(i, i + 1, x, gy, gx); });
  }

  void MaxPoolForward(const kernels::MaxPoolGeometry& g, int64_t images, const float* x, float* y,
                      int32_t* argmax) override {
    Launch(images * g.out_image(), [=] __device__(int64_t i) {
      kernels::MaxPoolForwardElements(g, i, i + 1, x, y, argmax);
    });
  }

  void MaxPoolBackward(const kernels::MaxPoolGeometry& g, int64_t images, const float* gy,
                       const int32_t* argmax, float* gx) override {
    Launch(images * g.in_image(), [=] __device__(int64_t i) {
      kernels::MaxPoolBackwardElements(g, i, i + 1, gy, argmax, gx);
    });
  }

  void Im2Col(const kernels::ConvShape& g, int64_t images, const float* x, float* col) override {
    Launch(images * g.pixels() * g.patch(),
           [=] __device__(int64_t i) { kernels::Im2Col(g, i, i + 1, x, col); });
  }

  void Col2Im(const kernels::ConvShape& g, int64_t images, const float* dcol, float* gx) override {
    Launch(images * g.in_image(),
           [=] __device__(int64_t i) { kernels::Col2Im(g, i, i + 1, dcol, gx); });
  }

  void DropoutForward(const kernels::DropoutParams& p, const float* x, float* mask, float* y,
                      int64_t n) override {
    Launch(n, [=] __device__(int64_t i) { kernels::DropoutForward(p, i, i + 1, x, mask, y); });
  }

  absl::StatusOr<LossSums> SoftmaxCrossEntropy(const float* logits, int64_t n, int64_t k,
                                               const int32_t* host_labels, float* grad) override {
    // Scratch: the two sums, then the labels.
    const size_t labels_offset = 2 * sizeof(double);
    const size_t bytes = labels_offset + static_cast<size_t>(n) * sizeof(int32_t);
    if (absl::Status s = EnsureBytes(*this, scratch_, bytes); !s.ok()) return s;
    char* base = static_cast<char*>(static_cast<void*>(scratch_.data()));
    double* sums = reinterpret_cast<double*>(base);
    int32_t* labels = reinterpret_cast<int32_t*>(base + labels_offset);
    Current();
    Note(cudaMemsetAsync(sums, 0, 2 * sizeof(double), stream_), "loss scratch");
    CopyToDevice(host_labels, labels, static_cast<size_t>(n) * sizeof(int32_t));
    SoftmaxCrossEntropySum(logits, n, k, labels, grad, sums);
    double host[2] = {0, 0};
    if (absl::Status s = CopyToHost(sums, host, sizeof(host)); !s.ok()) return s;
    return LossSums{.loss = host[0], .correct = static_cast<int64_t>(host[1])};
  }

  void SoftmaxCrossEntropySum(const float* logits, int64_t n, int64_t k, const int32_t* labels,
                              float* grad, double* sums) override {
    if (n <= 0) return;
    Current();
    SoftmaxCrossEntropySumKernel<<<1, kLossThreads, 0, stream_>>>(logits, n, k, labels, grad, sums);
    Note(cudaGetLastError(), "softmax cross-entropy launch");
  }

  void GatherRows(const float* src, const int32_t* src_labels, int64_t row_floats,
                  const int32_t* index, const int64_t* cursor, int64_t n, float* dst,
                  int32_t* dst_labels) override {
    Launch(n * row_floats, [=] __device__(int64_t i) {
      const int64_t row = i / row_floats, col = i - row * row_floats;
      const int64_t from = index[(cursor != nullptr ? *cursor : 0) + row];
      dst[i] = src[from * row_floats + col];
      if (col == 0) dst_labels[row] = src_labels[from];
    });
  }

  void AdvanceStep(const kernels::StepPlan& plan, int64_t steps,
                   kernels::StepScalars* scalars) override {
    Launch(1, [=] __device__(int64_t) { kernels::AdvanceStepScalars(plan, steps, scalars); });
  }

  bool can_capture() const override { return true; }

  absl::Status BeginCapture() override {
    Current();
    if (absl::Status s = Synchronize(); !s.ok()) return s;  // a clean queue to record on
    if (cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
        e != cudaSuccess) {
      cudaGetLastError();
      return absl::InternalError(
          absl::StrCat(info_.Id(), ": cannot capture: ", cudaGetErrorString(e)));
    }
    capturing_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() override {
    Current();
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    // A capture that failed leaves its error in the queue's record: clear
    // it, so the step can run uncaptured.
    absl::Status during;
    std::swap(during, error_);  // (nvcc warns on a discarded Status& from operator=)
    cudaGetLastError();
    if (ended != cudaSuccess || !during.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return absl::FailedPreconditionError(
          absl::StrCat(info_.Id(), ": the step could not be captured: ",
                       !during.ok() ? std::string(during.message()) : cudaGetErrorString(ended)));
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      cudaGetLastError();
      return absl::FailedPreconditionError(
          absl::StrCat(info_.Id(), ": cudaGraphInstantiate: ", cudaGetErrorString(made)));
    }
    return std::unique_ptr<DeviceGraph>(new CudaGraph(this, exec));
  }

  void SgdUpdate(const kernels::SgdParams& o, float* p, const float* g, float* v,
                 int64_t n) override {
    Launch(n, [=] __device__(int64_t i) { kernels::SgdUpdate(o, i, i + 1, p, g, v); });
  }

  void AdamUpdate(const kernels::AdamParams& o, float* p, const float* g, float* m, float* v,
                  int64_t n) override {
    Launch(n, [=] __device__(int64_t i) { kernels::AdamUpdate(o, i, i + 1, p, g, m, v); });
  }

 private:
  template <typename F>
  void Launch(int64_t n, F f) {
    if (n <= 0) return;
    Current();
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    ForEachIndex<<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(n, f);
    Note(cudaGetLastError(), "kernel launch");
  }

  // Makes this device the calling thread's current one: the stream, the
  // cuBLAS handle and cudaMalloc belong to it, and a pod trains several
  // devices from one thread (--gpus N). Cheap when it already is.
  void Current() { Note(cudaSetDevice(info_.index), "cudaSetDevice"); }

  // Keeps the first error of the queue; Synchronize and CopyToHost report it.
  void Note(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      error_.Update(
          absl::InternalError(absl::StrCat(info_.Id(), ": ", what, ": ", cudaGetErrorString(e))));
    }
  }

  absl::Status EnsureOnes(int64_t n) {
    if (ones_.floats() >= n) return absl::OkStatus();
    // Growing it inside a capture would free what the graph points to and
    // record a fill that never ran: fail the capture instead, and let the
    // step run launched.
    if (capturing_) {
      return absl::FailedPreconditionError(
          absl::StrCat(info_.Id(), ": SumRows needs a larger vector of ones while capturing"));
    }
    if (absl::Status s = EnsureBytes(*this, ones_, static_cast<size_t>(n) * sizeof(float));
        !s.ok()) {
      return s;
    }
    Fill(ones_.data(), n, 1.0f);
    return absl::OkStatus();
  }

  friend class CudaGraph;

  DeviceInfo info_;
  cudaStream_t stream_;
  cublasHandle_t blas_;
  absl::Status error_;
  bool capturing_ = false;
  DeviceBuffer blas_workspace_;  // cuBLAS's own: it must not allocate while a step is captured
  std::unique_ptr<LtDense> lt_;  // null: dense layers compose their kernels
  bool tf32_;
  DeviceBuffer ones_;     // SumRows' vector of ones
  DeviceBuffer scratch_;  // SoftmaxCrossEntropy's sums and labels
};

absl::Status CudaGraph::Replay() {
  device_->Current();
  device_->Note(cudaGraphLaunch(exec_, device_->stream_), "graph launch");
  return absl::OkStatus();
}

// cuBLAS's workspace: 32 MiB, NVIDIA's figure for Hopper.
constexpr size_t kBlasWorkspaceBytes = 32 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeDevice>> OpenCudaDevice(const DeviceInfo& info,
                                                              const DeviceOptions& options) {
  if (cudaError_t e = cudaSetDevice(info.index); e != cudaSuccess) {
    return absl::UnavailableError(
        absl::StrCat("cannot use ", info.Id(), ": ", cudaGetErrorString(e)));
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a stream on ", info.Id(), ": ", cudaGetErrorString(e)));
  }
  cublasHandle_t blas = nullptr;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    return absl::UnavailableError(absl::StrCat("cublasCreate failed on ", info.Id()));
  }
  cublasSetStream(blas, stream);
  cublasSetMathMode(blas, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  void* workspace = nullptr;
  if (cudaError_t e = cudaMalloc(&workspace, kBlasWorkspaceBytes); e != cudaSuccess) {
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate cuBLAS's workspace on ",
                                                     info.Id(), ": ", cudaGetErrorString(e)));
  }
  cublasSetWorkspace(blas, workspace, kBlasWorkspaceBytes);
  // cuBLASLt for the dense layers' fused epilogues; without it they compose.
  std::unique_ptr<LtDense> lt;
  cublasLtHandle_t lt_handle = nullptr;
  if (cublasLtCreate(&lt_handle) == CUBLAS_STATUS_SUCCESS)
    lt = std::make_unique<LtDense>(lt_handle);
  return std::unique_ptr<ComputeDevice>(
      new CudaDevice(info, stream, blas, DeviceBuffer(workspace, kBlasWorkspaceBytes, &FreeDevice),
                     std::move(lt), options.allow_tf32));
}

}  // namespace kubetrain::cuda
