// Reads a ProgressReporter's text back in tests: the loss of every progress
// line, in order. Header-only; stateless.
#ifndef KUBETRAIN_TESTS_SUPPORT_PROGRESS_TEXT_H_
#define KUBETRAIN_TESTS_SUPPORT_PROGRESS_TEXT_H_

#include <regex>
#include <string>
#include <vector>

namespace kubetrain::testing {

// Every "loss=<x>" of `text`, in order.
inline std::vector<double> LossCurveOf(const std::string& text) {
  std::vector<double> curve;
  const std::regex loss(R"((?:^| )loss=([0-9.]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), loss); it != std::sregex_iterator();
       ++it) {
    curve.push_back(std::stod((*it)[1]));
  }
  return curve;
}

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTS_SUPPORT_PROGRESS_TEXT_H_
