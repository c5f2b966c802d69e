// Expectations on a fake clock: what a reconcile waits to see in the cache
// before it may create or delete again, and the timeout that keeps a lost
// watch event from wedging a job.
#include "operator/controller/expectations.h"

#include <gtest/gtest.h>

#include "base/clock.h"

namespace kubetrain::controller {
namespace {

constexpr char kKey[] = "ns/job/pods";

class ExpectationsTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  Expectations expectations_{clock_, absl::Minutes(5)};
};

TEST_F(ExpectationsTest, NothingExpectedIsSatisfied) {
  EXPECT_TRUE(expectations_.Satisfied(kKey));
  // Expecting nothing records nothing.
  expectations_.ExpectCreations(kKey, {});
  expectations_.ExpectDeletions(kKey, {});
  EXPECT_TRUE(expectations_.Satisfied(kKey));
}

TEST_F(ExpectationsTest, CreationsAreSatisfiedOnceEveryOneIsObserved) {
  expectations_.ExpectCreations(kKey, {"job-worker-0", "job-worker-1"});
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  expectations_.CreationObserved(kKey, "job-worker-0");
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  // A name never expected (another pass's, or a stranger's) changes nothing.
  expectations_.CreationObserved(kKey, "job-ps-0");
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  // Observed twice (an update after the add): still one.
  expectations_.CreationObserved(kKey, "job-worker-0");
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  expectations_.CreationObserved(kKey, "job-worker-1");
  EXPECT_TRUE(expectations_.Satisfied(kKey));
}

TEST_F(ExpectationsTest, DeletionsAreTrackedByUid) {
  expectations_.ExpectDeletions(kKey, {"uid-1"});
  expectations_.ExpectCreations(kKey, {"job-worker-0"});
  expectations_.CreationObserved(kKey, "job-worker-0");
  EXPECT_FALSE(expectations_.Satisfied(kKey));  // the delete is still pending
  expectations_.DeletionObserved(kKey, "uid-2");
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  expectations_.DeletionObserved(kKey, "uid-1");
  EXPECT_TRUE(expectations_.Satisfied(kKey));
}

TEST_F(ExpectationsTest, KeysAreIndependent) {
  expectations_.ExpectCreations(kKey, {"a"});
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  EXPECT_TRUE(expectations_.Satisfied("ns/job/services"));
  expectations_.CreationObserved("ns/job/services", "a");
  EXPECT_FALSE(expectations_.Satisfied(kKey));
}

TEST_F(ExpectationsTest, UnobservedExpectationsTimeOut) {
  expectations_.ExpectCreations(kKey, {"a"});
  clock_.Advance(absl::ToInt64Nanoseconds(absl::Minutes(5) - absl::Nanoseconds(1)));
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  clock_.Advance(1);
  EXPECT_TRUE(expectations_.Satisfied(kKey));
}

// Expecting more restarts the timeout: the newest request gets its full
// time to show up.
TEST_F(ExpectationsTest, RaisingExpectationsRestartsTheTimeout) {
  expectations_.ExpectCreations(kKey, {"a"});
  clock_.Advance(absl::ToInt64Nanoseconds(absl::Minutes(4)));
  expectations_.ExpectDeletions(kKey, {"uid-1"});
  clock_.Advance(absl::ToInt64Nanoseconds(absl::Minutes(4)));
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  clock_.Advance(absl::ToInt64Nanoseconds(absl::Minutes(1)));
  EXPECT_TRUE(expectations_.Satisfied(kKey));
  // Raised again: pending again, with "a" and uid-1 still expected.
  expectations_.ExpectCreations(kKey, {"b"});
  expectations_.CreationObserved(kKey, "b");
  expectations_.CreationObserved(kKey, "a");
  EXPECT_FALSE(expectations_.Satisfied(kKey));
  expectations_.DeletionObserved(kKey, "uid-1");
  EXPECT_TRUE(expectations_.Satisfied(kKey));
}

TEST_F(ExpectationsTest, ForgetDropsEverything) {
  expectations_.ExpectCreations(kKey, {"a"});
  expectations_.ExpectDeletions(kKey, {"uid-1"});
  expectations_.Forget(kKey);
  EXPECT_TRUE(expectations_.Satisfied(kKey));
  // Observations after forgetting are harmless.
  expectations_.CreationObserved(kKey, "a");
  expectations_.DeletionObserved(kKey, "uid-1");
  EXPECT_TRUE(expectations_.Satisfied(kKey));
}

}  // namespace
}  // namespace kubetrain::controller
