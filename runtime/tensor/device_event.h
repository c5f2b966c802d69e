// DeviceEvent: a marker in a ComputeDevice's queue (a CUDA event on the
// device's stream), so that another thread can wait for the work queued
// before it: the exchange's communication thread waits for a gradient
// bucket's copy to pinned host memory before it sends the bucket.
// Record is called on the device's thread; Done and Wait from any thread
// (one waiter at a time), but not while Record runs.
#ifndef KUBETRAIN_RUNTIME_TENSOR_DEVICE_EVENT_H_
#define KUBETRAIN_RUNTIME_TENSOR_DEVICE_EVENT_H_

#include "absl/status/status.h"

namespace kubetrain {

class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Marks the end of what the device has queued so far.
  virtual void Record() = 0;
  // Whether the work queued before the last Record has run (true before
  // any Record).
  virtual bool Done() = 0;
  // Blocks until it has; the driver's error (a failed kernel before it)
  // otherwise.
  virtual absl::Status Wait() = 0;
};

// The event of a device whose queue runs as it is filled (the CPU): always
// done.
class ImmediateEvent final : public DeviceEvent {
 public:
  void Record() override {}
  bool Done() override { return true; }
  absl::Status Wait() override { return absl::OkStatus(); }
};

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_DEVICE_EVENT_H_
