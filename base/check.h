// KT_CHECK: aborts with a message on a broken invariant (a programmer bug),
// never for bad input, network or Kubernetes failures (those are Status).
// Debian's abseil predates absl/log, so this is the project's own.
//   KT_CHECK(n > 0) << "batch " << n;
//   KT_CHECK_EQ(a.size(), b.size());
#ifndef KUBETRAIN_BASE_CHECK_H_
#define KUBETRAIN_BASE_CHECK_H_

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace kubetrain::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": check failed: " << condition << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `KT_CHECK(c) << x` compile as a void expression in the false branch.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace kubetrain::internal

#define KT_CHECK(condition)                        \
  (condition) ? (void)0                            \
              : ::kubetrain::internal::Voidify() & \
                    ::kubetrain::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define KT_CHECK_OP(a, op, b) KT_CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define KT_CHECK_EQ(a, b) KT_CHECK_OP(a, ==, b)
#define KT_CHECK_NE(a, b) KT_CHECK_OP(a, !=, b)
#define KT_CHECK_GT(a, b) KT_CHECK_OP(a, >, b)
#define KT_CHECK_GE(a, b) KT_CHECK_OP(a, >=, b)
#define KT_CHECK_LT(a, b) KT_CHECK_OP(a, <, b)

#endif  // KUBETRAIN_BASE_CHECK_H_
