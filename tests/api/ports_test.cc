// The port constants the operator and the runtime share agree with each other.
#include "api/ports.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "api/training_job.h"

namespace kubetrain::api {
namespace {

TEST(PortsTest, SpelledOutFormsMatchTheNumbers) {
  EXPECT_EQ(std::string(kDefaultListenAddress), absl::StrCat("0.0.0.0:", kDefaultPort));
  EXPECT_EQ(std::string(kMetricsPortString), absl::StrCat(kMetricsPort));
}

}  // namespace
}  // namespace kubetrain::api
