#include "runtime/nn/layer.h"

#include "base/check.h"

namespace kubetrain::nn {

void Layer::GrowScratch(DeviceBuffer& buffer, size_t bytes) {
  absl::Status s = EnsureBytes(device(), buffer, bytes);
  KT_CHECK(s.ok()) << kind() << ": " << s.message();
}

}  // namespace kubetrain::nn
