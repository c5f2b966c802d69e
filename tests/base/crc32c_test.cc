#include "base/crc32c.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kubetrain {
namespace {

TEST(Crc32c, KnownAnswers) {
  EXPECT_EQ(base::Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(base::Crc32c("", 0), 0u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(base::Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);  // RFC 3720 B.4
  EXPECT_EQ(base::Crc32cPortable(0, "123456789", 9), 0xe3069283u);
}

TEST(Crc32c, FastPathMatchesThePortableOneAtEveryLengthAndSplit) {
  std::mt19937 rng(3);
  std::vector<unsigned char> data(3 * 4096 * 2 + 123);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{4095}, size_t{12288},
                   size_t{12289}, data.size()}) {
    EXPECT_EQ(base::Crc32c(data.data(), n), base::Crc32cPortable(0, data.data(), n)) << n;
  }
  const uint32_t whole = base::Crc32c(data.data(), data.size());
  EXPECT_EQ(base::Crc32cExtend(base::Crc32c(data.data(), 5000), data.data() + 5000, data.size() - 5000), whole);
  data[17000] ^= 1;
  EXPECT_NE(base::Crc32c(data.data(), data.size()), whole);
}

}  // namespace
}  // namespace kubetrain
