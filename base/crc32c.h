// CRC-32C (Castagnoli), the checksum on every tensor chunk that crosses the
// network. Uses the SSE4.2 crc32 instruction on three interleaved lanes
// when the CPU has it (about 20 GB/s), else a portable table. Both give the
// standard value (Crc32c("123456789") == 0xe3069283). Thread-safe.
#ifndef KUBETRAIN_BASE_CRC32C_H_
#define KUBETRAIN_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace kubetrain::base {

uint32_t Crc32c(const void* data, size_t size);

// Continues a CRC over more data: Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// The portable path, for tests and CPUs without SSE4.2.
uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t size);

}  // namespace kubetrain::base

#endif  // KUBETRAIN_BASE_CRC32C_H_
