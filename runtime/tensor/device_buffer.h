// DeviceBuffer: bytes owned in one device's memory (host memory for the
// CPU, GPU memory or pinned host memory for CUDA), freed by the function the
// device gave it. Move-only; thread-compatible.
#ifndef KUBETRAIN_RUNTIME_TENSOR_DEVICE_BUFFER_H_
#define KUBETRAIN_RUNTIME_TENSOR_DEVICE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace kubetrain {

class DeviceBuffer {
 public:
  using FreeFn = void (*)(void*);

  DeviceBuffer() = default;
  DeviceBuffer(void* data, size_t bytes, FreeFn free) : data_(data), bytes_(bytes), free_(free) {}
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_), free_(o.free_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = o.data_;
      bytes_ = o.bytes_;
      free_ = o.free_;
      o.data_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  size_t bytes() const { return bytes_; }
  int64_t floats() const { return static_cast<int64_t>(bytes_ / sizeof(float)); }
  float* data() const { return static_cast<float*>(data_); }
  int32_t* ints() const { return static_cast<int32_t*>(data_); }
  std::span<float> span() const { return {data(), bytes_ / sizeof(float)}; }

 private:
  void Reset() {
    if (data_ != nullptr && free_ != nullptr) free_(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_ = nullptr;
};

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_DEVICE_BUFFER_H_
