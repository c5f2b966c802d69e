// Shape of a tensor: a list of dimension sizes, outermost first.
// A value type; thread-compatible.
#ifndef KUBETRAIN_RUNTIME_TENSOR_SHAPE_H_
#define KUBETRAIN_RUNTIME_TENSOR_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kubetrain {

using Shape = std::vector<int64_t>;

// Product of the dimensions (1 for a scalar shape {}).
int64_t NumElements(const Shape& shape);

// "[28, 28, 1]".
std::string ShapeToString(const Shape& shape);

// {batch, dims...}.
Shape WithBatch(int64_t batch, const Shape& sample_shape);

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_SHAPE_H_
