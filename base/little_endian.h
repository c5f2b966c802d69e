// Fixed-size little-endian integers, the byte order of every kubetrain binary
// format (the PS data plane, the ring handshake, checkpoints), written and
// read byte by byte so the host's order never matters (LevelDB's
// EncodeFixed32 habit). Float payloads travel as the host's IEEE-754 bytes,
// which kubetrain requires to be little-endian (kHostIsLittleEndian, checked
// where floats are written). Pure functions; thread-safe.
#ifndef KUBETRAIN_BASE_LITTLE_ENDIAN_H_
#define KUBETRAIN_BASE_LITTLE_ENDIAN_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kubetrain::base {

inline constexpr bool kHostIsLittleEndian = std::endian::native == std::endian::little;

// Writes `v` at p[0..sizeof(T)), least significant byte first.
template <typename T>
void PutLittleEndian(void* p, T v) {
  static_assert(std::is_integral_v<T>, "integers only");
  using U = std::make_unsigned_t<T>;
  const U u = static_cast<U>(v);
  auto* out = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<unsigned char>(u >> (8 * i));
}

// Reads a T written by PutLittleEndian.
template <typename T>
T GetLittleEndian(const void* p) {
  static_assert(std::is_integral_v<T>, "integers only");
  using U = std::make_unsigned_t<T>;
  const auto* in = static_cast<const unsigned char*>(p);
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(U{in[i]} << (8 * i));
  return static_cast<T>(u);
}

}  // namespace kubetrain::base

#endif  // KUBETRAIN_BASE_LITTLE_ENDIAN_H_
