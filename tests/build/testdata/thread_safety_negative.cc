// A negative fixture for tests/build/thread_safety_test.sh, linked into nothing: it reads
// a guarded field without holding its mutex, which clang++ -Wthread-safety
// -Werror=thread-safety must refuse. If this compiles, the check is not checking.
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::testdata {

class Counter {
 public:
  void Add(int n) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    value_ += n;
  }
  // The bug the analysis exists for: no lock held.
  int value() const { return value_; }

 private:
  mutable absl::Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
};

int ReadUnlocked() {
  Counter c;
  c.Add(1);
  return c.value();
}

}  // namespace kubetrain::testdata
