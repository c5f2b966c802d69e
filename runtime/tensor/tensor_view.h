// TensorView: a non-owning float32 view (pointer + shape) into memory owned
// elsewhere, usually a FlatBuffer or a layer's activation buffer.
// Copyable value type; thread-compatible (no synchronisation of the data).
#ifndef KUBETRAIN_RUNTIME_TENSOR_TENSOR_VIEW_H_
#define KUBETRAIN_RUNTIME_TENSOR_TENSOR_VIEW_H_

#include <cstdint>
#include <span>

#include "runtime/tensor/shape.h"

namespace kubetrain {

class TensorView {
 public:
  TensorView() = default;
  TensorView(float* data, Shape shape) : data_(data), shape_(std::move(shape)) {}

  float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int64_t size() const { return NumElements(shape_); }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  float& operator[](int64_t i) const { return data_[i]; }
  std::span<float> span() const { return {data_, static_cast<size_t>(size())}; }

  // Same data, another shape with the same number of elements.
  TensorView Reshaped(Shape shape) const { return TensorView(data_, std::move(shape)); }

 private:
  float* data_ = nullptr;
  Shape shape_;
};

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_TENSOR_VIEW_H_
