#include "operator/controller/slow_start.h"

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kubetrain::controller {

absl::Status RunSlowStart(const std::vector<SlowStartOp>& ops, int max_parallel) {
  size_t next = 0;
  size_t batch = 1;
  while (next < ops.size()) {
    size_t n = std::min(batch, ops.size() - next);
    std::vector<absl::Status> results(n);
    std::vector<std::thread> threads;
    threads.reserve(n);
    auto run = [&](size_t i) {
      // An exception must not escape a thread (that ends the process).
      try {
        results[i] = ops[next + i]();
      } catch (const std::exception& e) {
        results[i] = absl::InternalError(absl::StrCat("exception: ", e.what()));
      }
    };
    for (size_t i = 0; i < n; ++i) {
      try {
        threads.emplace_back(run, i);
      } catch (const std::system_error&) {
        run(i);  // no thread to be had (pids limit): do it on this one
      }
    }
    for (std::thread& t : threads) t.join();
    next += n;
    for (const absl::Status& s : results) {
      if (!s.ok()) return s;
    }
    batch = std::min<size_t>(batch * 2, static_cast<size_t>(std::max(1, max_parallel)));
  }
  return absl::OkStatus();
}

absl::Status RunSlowStartSideBySide(const std::vector<SlowStartOp>& a,
                                    const std::vector<SlowStartOp>& b, int max_parallel) {
  if (a.empty()) return RunSlowStart(b, max_parallel);
  if (b.empty()) return RunSlowStart(a, max_parallel);
  absl::Status a_status;
  std::thread a_thread;
  try {
    a_thread = std::thread([&] { a_status = RunSlowStart(a, max_parallel); });
  } catch (const std::system_error&) {
    a_status = RunSlowStart(a, max_parallel);  // no thread to be had: one after the other
  }
  absl::Status b_status = RunSlowStart(b, max_parallel);
  if (a_thread.joinable()) a_thread.join();
  return a_status.ok() ? b_status : a_status;
}

}  // namespace kubetrain::controller
