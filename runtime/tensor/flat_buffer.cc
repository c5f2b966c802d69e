#include "runtime/tensor/flat_buffer.h"

#include "kubetrain/check.h"

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
  allocated_ = true;
}

TensorView FlatParameters::Param(int index) {
  KT_CHECK(allocated_);
  const FlatEntry& e = entries_.at(index);
  return TensorView(params_.data() + e.offset, e.shape);
}

TensorView FlatParameters::Grad(int index) {
  KT_CHECK(allocated_);
  const FlatEntry& e = entries_.at(index);
  return TensorView(grads_.data() + e.offset, e.shape);
}

}  // namespace kubetrain
