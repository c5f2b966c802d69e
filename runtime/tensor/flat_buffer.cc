#include "runtime/tensor/flat_buffer.h"

#include "base/check.h"

namespace kubetrain {
namespace {
constexpr int64_t kAlignElements = AlignedBuffer::kAlignment / sizeof(float);
}  // namespace

int FlatParameters::Reserve(std::string name, Shape shape) {
  KT_CHECK(!allocated_) << "FlatParameters::Reserve after Allocate";
  FlatEntry e;
  e.name = std::move(name);
  e.size = NumElements(shape);
  e.shape = std::move(shape);
  e.offset = (total_ + kAlignElements - 1) / kAlignElements * kAlignElements;
  total_ = e.offset + e.size;
  entries_.push_back(std::move(e));
  return static_cast<int>(entries_.size()) - 1;
}

void FlatParameters::Allocate() {
  KT_CHECK(!allocated_) << "FlatParameters::Allocate called twice";
  params_ = AlignedBuffer(static_cast<size_t>(total_));
  grads_ = AlignedBuffer(static_cast<size_t>(total_));
  params_ptr_ = params_.data();
  grads_ptr_ = grads_.data();
  allocated_ = true;
}

absl::Status FlatParameters::Allocate(ComputeDevice& device) {
  KT_CHECK(!allocated_) << "FlatParameters::Allocate called twice";
  const size_t bytes = static_cast<size_t>(total_) * sizeof(float);
  absl::StatusOr<DeviceBuffer> p = device.Allocate(bytes);
  if (!p.ok()) return p.status();
  absl::StatusOr<DeviceBuffer> g = device.Allocate(bytes);
  if (!g.ok()) return g.status();
  device_params_ = *std::move(p);
  device_grads_ = *std::move(g);
  params_ptr_ = device_params_.data();
  grads_ptr_ = device_grads_.data();
  device.Fill(params_ptr_, total_, 0.0f);
  device.Fill(grads_ptr_, total_, 0.0f);
  allocated_ = true;
  return absl::OkStatus();
}

std::unique_ptr<FlatParameters> FlatParameters::HostCopyOfLayout() const {
  auto copy = std::make_unique<FlatParameters>();
  copy->entries_ = entries_;
  copy->total_ = total_;
  copy->Allocate();
  return copy;
}

TensorView FlatParameters::Param(int index) {
  KT_CHECK(allocated_);
  const FlatEntry& e = entries_.at(index);
  return TensorView(params_ptr_ + e.offset, e.shape);
}

TensorView FlatParameters::Grad(int index) {
  KT_CHECK(allocated_);
  const FlatEntry& e = entries_.at(index);
  return TensorView(grads_ptr_ + e.offset, e.shape);
}

}  // namespace kubetrain
