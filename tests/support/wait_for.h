// WaitFor: polls a condition until it holds or a deadline passes. Tests
// wait on conditions, never sleep for luck. Shared by every test.
#ifndef KUBETRAIN_TESTS_SUPPORT_WAIT_FOR_H_
#define KUBETRAIN_TESTS_SUPPORT_WAIT_FOR_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kubetrain::testing_util {

inline bool WaitFor(const std::function<bool()>& condition,
                    absl::Duration timeout = absl::Seconds(20),
                    absl::Duration poll = absl::Milliseconds(10)) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(poll);
  }
  return condition();
}

// A cancellation callback (as PsShard's waits take) that says "give up"
// once `timeout` has passed, so a wait that never ends fails the test
// instead of hanging it.
inline std::function<bool()> GiveUpAfter(absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  return [deadline] { return absl::Now() > deadline; };
}

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_WAIT_FOR_H_
