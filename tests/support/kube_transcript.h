// Parser for the kube-apiserver request/response transcripts kept under
// tests/operator/kube/testdata/kube-api-transcripts/ (format described at the
// top of each file): '###' titles, '>>>' requests, '<<<' responses with exact
// body bytes, compact setup lines, and watch streams ('t=... | <line>').
// Pure functions; thread-safe.
#ifndef KUBETRAIN_TESTS_SUPPORT_KUBE_TRANSCRIPT_H_
#define KUBETRAIN_TESTS_SUPPORT_KUBE_TRANSCRIPT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kubetrain::testing {

struct TranscriptExchange {
  std::string title;
  std::string method;  // empty: a note-only block
  std::string target;  // path?query as sent
  std::string content_type;
  std::string request_body;
  int code = 0;                                         // 0: no response recorded
  std::map<std::string, std::string> response_headers;  // as written
  std::string response_body;                            // exact bytes
  bool during_watch = false;                            // sent while the preceding watch was open
  bool compact = false;    // a one-line setup record ("POST ... -> 201 resourceVersion=N")
  std::string compact_rv;  // its resourceVersion
  // For watch requests: the received lines (arrival-time prefix removed).
  std::vector<std::string> watch_lines;
  std::string stream_end;  // the "<<< end of stream" note
  bool IsWatch() const;
};

std::vector<TranscriptExchange> ParseTranscript(const std::string& text);
absl::StatusOr<std::vector<TranscriptExchange>> ReadTranscript(const std::string& path);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTS_SUPPORT_KUBE_TRANSCRIPT_H_
