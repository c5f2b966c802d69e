// PromtoolCheckMetrics: runs `promtool check metrics` (Debian's prometheus
// package) on a scrape, the linter Prometheus itself applies to exporters.
// Stateless.
#ifndef KUBETRAIN_TESTS_OPERATOR_MAIN_PROMTOOL_H_
#define KUBETRAIN_TESTS_OPERATOR_MAIN_PROMTOOL_H_

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace kubetrain::operator_main::test_util {

// promtool's path on $PATH, or "" when it is not installed.
inline std::string FindPromtool() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin", ':')) {
    const std::string candidate = std::string(dir) + "/promtool";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr: empty when the scrape is clean
};

// Checks `scrape` with `promtool` (the path FindPromtool gave).
inline PromtoolResult PromtoolCheckMetrics(const std::string& promtool, const std::string& scrape) {
  const std::string file = (std::filesystem::path(::testing::TempDir()) /
                            ("scrape_" + std::to_string(getpid()) + ".txt"))
                               .string();
  {
    std::ofstream out(file, std::ios::trunc);
    out << scrape;
  }
  const testing_util::ProcessResult r = testing_util::RunProcess(
      {"/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"", promtool, file},
      std::chrono::seconds(60));
  std::filesystem::remove(file);
  return {r.exit_code, r.out + r.err};
}

}  // namespace kubetrain::operator_main::test_util

#endif  // KUBETRAIN_TESTS_OPERATOR_MAIN_PROMTOOL_H_
