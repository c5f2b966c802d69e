#include "runtime/tensor/shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kubetrain {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

Shape WithBatch(int64_t batch, const Shape& sample_shape) {
  Shape s;
  s.reserve(sample_shape.size() + 1);
  s.push_back(batch);
  s.insert(s.end(), sample_shape.begin(), sample_shape.end());
  return s;
}

}  // namespace kubetrain
