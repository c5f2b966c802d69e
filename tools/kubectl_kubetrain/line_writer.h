// LineWriter: whole lines to one stream from several threads, so the lines
// of concurrently followed replicas never interleave mid-line. Thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LINE_WRITER_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LINE_WRITER_H_

#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::kubectl_plugin {

class LineWriter {
 public:
  explicit LineWriter(std::ostream& out) : out_(out) {}
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  // Writes `prefix`, `text` and '\n', and flushes.
  void Write(absl::string_view prefix, absl::string_view text) {
    absl::MutexLock lock(&mu_);
    out_ << prefix << text << '\n';
    out_.flush();
  }

 private:
  absl::Mutex mu_;
  std::ostream& out_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LINE_WRITER_H_
