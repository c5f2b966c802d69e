// Test helper: builds IDX file bytes. Thread-safe (pure functions).
#ifndef KUBETRAIN_TESTS_SUPPORT_IDX_TEST_UTIL_H_
#define KUBETRAIN_TESTS_SUPPORT_IDX_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kubetrain::data::testing_util {

// Magic 0x0000<type><dims.size()>, big-endian dims, then `data` verbatim.
inline std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                            uint8_t type = 0x08) {
  std::string out = {'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(d >> shift));
  }
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  return out;
}

inline std::vector<uint8_t> Iota(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i);
  return v;
}

}  // namespace kubetrain::data::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_IDX_TEST_UTIL_H_
