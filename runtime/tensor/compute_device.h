// ComputeDevice: the one interface layers, the loss and optimizers compute
// through. Implementations: CpuDevice (cpu_device.h: OpenBLAS and the
// ParallelFor thread pool) and the CUDA device (cuda/cuda_device.h: cuBLAS
// and kernels, everything on one stream); OpenComputeDevice (device.h)
// picks one at start. Element-wise and reduction logic is written once, as
// host/device kernels (runtime/tensor/kernels/, runtime/tensor/kernels/), which
// both implementations run.
//
// Every pointer argument lives in this device's memory unless its name
// says host. Operations are queued in order; CopyToHost, the loss and
// Synchronize wait for what was queued before them and report the first
// error of the queue (a CPU device never fails); nothing else waits, so a
// training step can queue its work and let the device run behind the host
// (the queued copies, DeviceEvent, the summed loss). A device is used by one
// thread at a time (not thread-safe); its events may be waited on from others.
#ifndef KUBETRAIN_RUNTIME_TENSOR_COMPUTE_DEVICE_H_
#define KUBETRAIN_RUNTIME_TENSOR_COMPUTE_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/device.h"
#include "runtime/tensor/device_buffer.h"
#include "runtime/tensor/device_event.h"
#include "runtime/tensor/kernels/dropout_mask.h"
#include "runtime/tensor/kernels/im2col.h"
#include "runtime/tensor/kernels/max_pool.h"
#include "runtime/tensor/kernels/optimizer_update.h"
#include "runtime/tensor/kernels/step_scalars.h"

namespace kubetrain {

struct DeviceMemory {
  int64_t total_bytes = 0;  // the device's memory (0 for the CPU: not tracked)
  int64_t free_bytes = 0;   // free now (every process on the device counts)
};

// A dense layer's shapes: x{batch, inputs}, w{units, inputs}, y{batch, units}.
struct DenseShape {
  int64_t batch = 0, inputs = 0, units = 0;
  bool relu = false;  // ReLU applied to y (fused into the layer)
};

// A captured sequence of a device's work (a CUDA graph), replayed in the
// device's queue. Used from the device's thread.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Queues the whole sequence again.
  virtual absl::Status Replay() = 0;
};

struct LossSums {
  double loss = 0;      // sum over the rows of each row's loss, in row order
  int64_t correct = 0;  // rows whose arg-max is the label
};

class ComputeDevice {
 public:
  virtual ~ComputeDevice() = default;

  virtual const DeviceInfo& info() const = 0;
  // Whether device pointers are plain host pointers that the CPU-specialised
  // layer code (blocked convolutions, direct conv) may use.
  virtual bool host_memory() const = 0;

  // Device memory, uninitialised. ResourceExhausted when it does not fit.
  virtual absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) = 0;
  // Host memory the device copies to and from fastest (page-locked on CUDA).
  virtual absl::StatusOr<DeviceBuffer> AllocatePinnedHost(size_t bytes) = 0;
  virtual DeviceMemory Memory() = 0;

  // Copies at once: the host buffer may change as soon as this returns.
  virtual void CopyToDevice(const void* host, void* device, size_t bytes) = 0;
  // Waits for the queue, then copies.
  virtual absl::Status CopyToHost(const void* device, void* host, size_t bytes) = 0;
  // Queued copies between the device and pinned host memory
  // (AllocatePinnedHost): they run in queue order, and the host side must
  // stay as it is (to the device) or unread (to the host) until the queue
  // has passed them: an event recorded after them says when. The CPU copies
  // at once.
  virtual void CopyToHostAsync(const void* device, void* host, size_t bytes) = 0;
  virtual void CopyToDeviceAsync(const void* host, void* device, size_t bytes) = 0;
  // A marker in this device's queue (device_event.h).
  virtual absl::StatusOr<std::unique_ptr<DeviceEvent>> NewEvent() = 0;
  // The native queue the device runs on (a cudaStream_t), for libraries that
  // queue work on it themselves (NCCL); nullptr for the CPU.
  virtual void* native_queue() { return nullptr; }
  virtual void Copy(const float* src, float* dst, int64_t n) = 0;
  virtual void Fill(float* x, int64_t n, float value) = 0;
  virtual absl::Status Synchronize() = 0;

  // Row-major C[m x n] = alpha * op(A) * op(B) + beta * C (blas.h).
  virtual void Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) = 0;
  // y{rows, cols} = row broadcast; out{cols} = column sums of x{rows, cols}.
  virtual void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y) = 0;
  virtual void SumRows(const float* x, int64_t rows, int64_t cols, float* out) = 0;
  virtual void Multiply(const float* a, const float* b, float* y, int64_t n) = 0;
  virtual void Scale(float* x, int64_t n, float s) = 0;

  virtual void ReluForward(const float* x, float* y, int64_t n) = 0;
  virtual void ReluBackward(const float* x, const float* gy, float* gx, int64_t n) = 0;
  virtual void MaxPoolForward(const kernels::MaxPoolGeometry& g, int64_t images, const float* x,
                              float* y, int32_t* argmax) = 0;
  virtual void MaxPoolBackward(const kernels::MaxPoolGeometry& g, int64_t images, const float* gy,
                               const int32_t* argmax, float* gx) = 0;
  // col for `images` images starting at x; gx for `images` images from dcol.
  virtual void Im2Col(const kernels::ConvShape& g, int64_t images, const float* x, float* col) = 0;
  virtual void Col2Im(const kernels::ConvShape& g, int64_t images, const float* dcol,
                      float* gx) = 0;
  virtual void DropoutForward(const kernels::DropoutParams& p, const float* x, float* mask,
                              float* y, int64_t n) = 0;

  // A dense layer (runtime/nn/dense.h), fused where the device can. The
  // defaults compose the operations above; CpuDevice overrides them.
  // y = x * w^T + bias, then ReLU when s.relu.
  virtual void DenseForward(const DenseShape& s, const float* x, const float* w, const float* bias,
                            float* y);
  // From gy = d(loss)/d(y) (passed back through the ReLU, read from y, into
  // `masked`, batch * units scratch, when s.relu): overwrites dw and db, and
  // dx when it is non-null.
  virtual void DenseBackward(const DenseShape& s, const float* x, const float* w, const float* y,
                             const float* gy, float* masked, float* dw, float* db, float* dx);

  // Softmax cross-entropy of logits{n, k} against host labels; writes the
  // batch-mean loss's gradient when grad is non-null. Waits for the result.
  virtual absl::StatusOr<LossSums> SoftmaxCrossEntropy(const float* logits, int64_t n, int64_t k,
                                                       const int32_t* host_labels, float* grad) = 0;
  // The same without waiting, labels in device memory: adds the batch's
  // summed row losses to sums[0] and its correct rows to sums[1] (device
  // memory; added in a fixed order, so the same on every run), for the
  // trainer to read once per progress line instead of once per step.
  virtual void SoftmaxCrossEntropySum(const float* logits, int64_t n, int64_t k,
                                      const int32_t* labels, float* grad, double* sums) = 0;

  // A batch from a data set held in device memory: with k = index[at + i]
  // (at = *cursor, or 0 when cursor is null: a captured step's position,
  // read on the device), row i of dst (row_floats floats) is row k of src
  // and dst_labels[i] = src_labels[k], for i < n. Every pointer here is in
  // device memory.
  virtual void GatherRows(const float* src, const int32_t* src_labels, int64_t row_floats,
                          const int32_t* index, const int64_t* cursor, int64_t n, float* dst,
                          int32_t* dst_labels) = 0;

  // kernels::AdvanceStepScalars on the device (one thread).
  virtual void AdvanceStep(const kernels::StepPlan& plan, int64_t steps,
                           kernels::StepScalars* scalars) = 0;

  // Capture (CUDA graphs): between BeginCapture and EndCapture what is
  // queued is recorded instead of run, and the graph replays it, with the
  // same pointers and arguments, as one launch. A wait (CopyToHost,
  // Synchronize, the waiting loss) or a copy from pageable host memory
  // while capturing fails the capture (EndCapture says so). Devices that
  // cannot capture (the CPU) answer Unimplemented.
  virtual bool can_capture() const { return false; }
  virtual absl::Status BeginCapture() {
    return absl::UnimplementedError(absl::StrCat(info().Id(), " cannot capture steps"));
  }
  virtual absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() {
    return absl::UnimplementedError(absl::StrCat(info().Id(), " cannot capture steps"));
  }

  // Fused optimizer updates (kernels/optimizer_update.h).
  virtual void SgdUpdate(const kernels::SgdParams& o, float* p, const float* g, float* v,
                         int64_t n) = 0;
  virtual void AdamUpdate(const kernels::AdamParams& o, float* p, const float* g, float* m,
                          float* v, int64_t n) = 0;
};

// Grows `buffer` (never shrinks) to at least `bytes` on `device`; the
// contents are not kept.
absl::Status EnsureBytes(ComputeDevice& device, DeviceBuffer& buffer, size_t bytes);

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_COMPUTE_DEVICE_H_
