// WaitFor: polls a condition until it holds or a deadline passes. Tests
// wait on conditions, never sleep for luck.
#ifndef KUBETRAIN_TESTS_OPERATOR_KUBE_WAIT_FOR_H_
#define KUBETRAIN_TESTS_OPERATOR_KUBE_WAIT_FOR_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kubetrain::kube {

inline bool WaitFor(const std::function<bool()>& condition,
                    absl::Duration timeout = absl::Seconds(20)) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return condition();
}

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_TESTS_OPERATOR_KUBE_WAIT_FOR_H_
