// FakeDevice: a ComputeDevice that computes on the CPU (it delegates every
// operation to a CpuDevice) but says its memory is not host memory, so that
// the model, the layers and the trainer take the paths a GPU takes (device
// im2col convolution, host-staged parameter initialisation, StagedExchange,
// the resident data set, the memory check) on machines without a GPU.
// Memory() reports what the test sets, and it counts the copies and the
// waits (Synchronize, CopyToHost, the waiting loss), so a test can check
// that a step does not wait on the device. Its queue runs as it is filled
// (queued copies copy at once, events are always done), except while it
// captures: as a CUDA stream does, it then records every queued operation,
// with its arguments, instead of running it, fails the capture on a wait or
// a copy from host memory, and replays the record as a graph. Header-only;
// not thread-safe.
#ifndef KUBETRAIN_TESTS_SUPPORT_FAKE_DEVICE_H_
#define KUBETRAIN_TESTS_SUPPORT_FAKE_DEVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor/cpu_device.h"

namespace kubetrain::testing {

class FakeDevice final : public ComputeDevice {
  // Always done, as the queue runs as it is filled; counts its waits.
  class CountedEvent final : public DeviceEvent {
   public:
    explicit CountedEvent(std::atomic<int>* waits) : waits_(waits) {}
    void Record() override {}
    bool Done() override { return true; }
    absl::Status Wait() override {
      ++*waits_;
      return absl::OkStatus();
    }

   private:
    std::atomic<int>* waits_;
  };

  using Op = std::function<void()>;

  class Graph final : public DeviceGraph {
   public:
    Graph(std::vector<Op> ops, int* replays) : ops_(std::move(ops)), replays_(replays) {}
    absl::Status Replay() override {
      ++*replays_;
      for (const Op& op : ops_) op();
      return absl::OkStatus();
    }

   private:
    std::vector<Op> ops_;
    int* replays_;
  };

 public:
  FakeDevice() {
    info_.kind = DeviceKind::kCuda;
    info_.index = 7;
    info_.name = "fake";
  }

  void set_memory(DeviceMemory m) { memory_ = m; }
  void set_uuid(const std::string& uuid) { info_.uuid = uuid; }
  // Turns capture off, as on a device that has none.
  void set_can_capture(bool can) { can_capture_ = can; }
  int copies_to_host() const { return copies_to_host_; }
  int copies_to_device() const { return copies_to_device_; }
  int queued_copies() const { return queued_copies_; }
  // Calls that wait for the device's queue (on the device's thread), and
  // waits for one of its events (any thread).
  int waits() const { return waits_; }
  int event_waits() const { return event_waits_.load(); }
  // Operations run, whether queued one by one or replayed in a graph.
  int64_t operations() const { return operations_; }
  int replays() const { return replays_; }

  const DeviceInfo& info() const override { return info_; }
  bool host_memory() const override { return false; }
  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) override { return cpu_.Allocate(bytes); }
  absl::StatusOr<DeviceBuffer> AllocatePinnedHost(size_t bytes) override {
    return cpu_.Allocate(bytes);
  }
  DeviceMemory Memory() override { return memory_; }
  void CopyToDevice(const void* host, void* device, size_t bytes) override {
    ++copies_to_device_;
    if (Refused("a copy from pageable host memory")) return;
    cpu_.CopyToDevice(host, device, bytes);
  }
  absl::Status CopyToHost(const void* device, void* host, size_t bytes) override {
    ++copies_to_host_;
    ++waits_;
    if (Refused("a wait (CopyToHost)")) return capture_error_;
    return cpu_.CopyToHost(device, host, bytes);
  }
  void CopyToHostAsync(const void* device, void* host, size_t bytes) override {
    ++queued_copies_;
    Do([=, this] { cpu_.CopyToHostAsync(device, host, bytes); });
  }
  void CopyToDeviceAsync(const void* host, void* device, size_t bytes) override {
    ++queued_copies_;
    Do([=, this] { cpu_.CopyToDeviceAsync(host, device, bytes); });
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> NewEvent() override {
    return std::unique_ptr<DeviceEvent>(new CountedEvent(&event_waits_));
  }
  void Copy(const float* src, float* dst, int64_t n) override {
    Do([=, this] { cpu_.Copy(src, dst, n); });
  }
  void Fill(float* x, int64_t n, float value) override {
    Do([=, this] { cpu_.Fill(x, n, value); });
  }
  absl::Status Synchronize() override {
    ++waits_;
    if (Refused("a wait (Synchronize)")) return capture_error_;
    return absl::OkStatus();
  }
  void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override {
    Do([=, this] { cpu_.Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  }
  void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y) override {
    Do([=, this] { cpu_.BroadcastRows(row, rows, cols, y); });
  }
  void SumRows(const float* x, int64_t rows, int64_t cols, float* out) override {
    Do([=, this] { cpu_.SumRows(x, rows, cols, out); });
  }
  void Multiply(const float* a, const float* b, float* y, int64_t n) override {
    Do([=, this] { cpu_.Multiply(a, b, y, n); });
  }
  void Scale(float* x, int64_t n, float s) override {
    Do([=, this] { cpu_.Scale(x, n, s); });
  }
  void ReluForward(const float* x, float* y, int64_t n) override {
    Do([=, this] { cpu_.ReluForward(x, y, n); });
  }
  void ReluBackward(const float* x, const float* gy, float* gx, int64_t n) override {
    Do([=, this] { cpu_.ReluBackward(x, gy, gx, n); });
  }
  void MaxPoolForward(const kernels::MaxPoolGeometry& g, int64_t images, const float* x, float* y,
                      int32_t* argmax) override {
    Do([=, this] { cpu_.MaxPoolForward(g, images, x, y, argmax); });
  }
  void MaxPoolBackward(const kernels::MaxPoolGeometry& g, int64_t images, const float* gy,
                       const int32_t* argmax, float* gx) override {
    Do([=, this] { cpu_.MaxPoolBackward(g, images, gy, argmax, gx); });
  }
  void Im2Col(const kernels::ConvShape& g, int64_t images, const float* x, float* col) override {
    Do([=, this] { cpu_.Im2Col(g, images, x, col); });
  }
  void Col2Im(const kernels::ConvShape& g, int64_t images, const float* dcol, float* gx) override {
    Do([=, this] { cpu_.Col2Im(g, images, dcol, gx); });
  }
  void DropoutForward(const kernels::DropoutParams& p, const float* x, float* mask, float* y,
                      int64_t n) override {
    Do([=, this] { cpu_.DropoutForward(p, x, mask, y, n); });
  }
  absl::StatusOr<LossSums> SoftmaxCrossEntropy(const float* logits, int64_t n, int64_t k,
                                               const int32_t* host_labels, float* grad) override {
    ++waits_;
    if (Refused("a wait (the loss)")) return capture_error_;
    return cpu_.SoftmaxCrossEntropy(logits, n, k, host_labels, grad);
  }
  void SoftmaxCrossEntropySum(const float* logits, int64_t n, int64_t k, const int32_t* labels,
                              float* grad, double* sums) override {
    Do([=, this] { cpu_.SoftmaxCrossEntropySum(logits, n, k, labels, grad, sums); });
  }
  void GatherRows(const float* src, const int32_t* src_labels, int64_t row_floats,
                  const int32_t* index, const int64_t* cursor, int64_t n, float* dst,
                  int32_t* dst_labels) override {
    Do([=, this] {
      cpu_.GatherRows(src, src_labels, row_floats, index, cursor, n, dst, dst_labels);
    });
  }
  void AdvanceStep(const kernels::StepPlan& plan, int64_t steps,
                   kernels::StepScalars* scalars) override {
    Do([=, this] { cpu_.AdvanceStep(plan, steps, scalars); });
  }
  void SgdUpdate(const kernels::SgdParams& o, float* p, const float* g, float* v,
                 int64_t n) override {
    Do([=, this] { cpu_.SgdUpdate(o, p, g, v, n); });
  }
  void AdamUpdate(const kernels::AdamParams& o, float* p, const float* g, float* m, float* v,
                  int64_t n) override {
    Do([=, this] { cpu_.AdamUpdate(o, p, g, m, v, n); });
  }

  bool can_capture() const override { return can_capture_; }
  absl::Status BeginCapture() override {
    if (!can_capture_) return ComputeDevice::BeginCapture();
    if (capturing_) return absl::FailedPreconditionError("already capturing");
    capturing_ = true;
    capture_error_ = absl::OkStatus();
    recorded_.clear();
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() override {
    if (!capturing_) return absl::FailedPreconditionError("not capturing");
    capturing_ = false;
    std::vector<Op> ops = std::move(recorded_);
    recorded_.clear();
    if (!capture_error_.ok()) return capture_error_;
    return std::unique_ptr<DeviceGraph>(new Graph(std::move(ops), &replays_));
  }

 private:
  // Runs the operation, or records it while capturing.
  void Do(Op op) {
    if (capturing_) {
      recorded_.push_back([this, op = std::move(op)] {
        ++operations_;
        op();
      });
      return;
    }
    ++operations_;
    op();
  }
  // While capturing, fails the capture for `what` (true: skip it).
  bool Refused(const char* what) {
    if (!capturing_) return false;
    if (capture_error_.ok()) {
      capture_error_ =
          absl::FailedPreconditionError(absl::StrCat("fake:7: ", what, " while capturing a step"));
    }
    return true;
  }

  CpuDevice cpu_;
  DeviceInfo info_;
  DeviceMemory memory_;
  int copies_to_host_ = 0;
  int copies_to_device_ = 0;
  int queued_copies_ = 0;
  int waits_ = 0;
  std::atomic<int> event_waits_{0};
  bool can_capture_ = true;
  bool capturing_ = false;
  absl::Status capture_error_;
  std::vector<Op> recorded_;
  int64_t operations_ = 0;
  int replays_ = 0;
};

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTS_SUPPORT_FAKE_DEVICE_H_
