// HttpsRequest and HttpsReply: one request to an HTTPS endpoint that
// kube-apiserver calls (the node agent's kubelet port, the operator's
// admission webhook) and the way its answer goes back, apart from the
// transport (https_server.h serves them; tests use a fake reply).
#ifndef KUBETRAIN_OPERATOR_KUBE_HTTPS_REQUEST_H_
#define KUBETRAIN_OPERATOR_KUBE_HTTPS_REQUEST_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace kubetrain::kube {

struct HttpsRequest {
  std::string method;                          // "GET", "POST"
  std::string path;                            // percent-decoded
  std::map<std::string, std::string> query;    // decoded; the last value wins
  std::map<std::string, std::string> headers;  // names in lower case; the last value wins
  std::string body;                            // Content-Length bytes (none for GET)
};

// Not thread-safe: the one handler thread of its request uses it. A handler
// answers with one Respond, or one Fail, or a stream of Writes.
class HttpsReply {
 public:
  virtual ~HttpsReply() = default;
  // Sends body bytes of a 200 text/plain answer (the header goes with the
  // first call, which may be empty, so a follow shows at once). False once
  // the client went away.
  virtual bool Write(std::string_view bytes) = 0;
  // An error answer: `code` and the text as the body, as the kubelet writes
  // them. Only before the first Write.
  virtual void Fail(int code, const std::string& text) = 0;
  // A whole answer of `code` with `body` of `content_type` (an admission
  // review's JSON). Only before the first Write.
  virtual void Respond(int code, const std::string& content_type, const std::string& body) = 0;
  // Waits up to `wait` for the client to go away (or the server to stop):
  // true when it did, false when the wait ran out.
  virtual bool Gone(absl::Duration wait) = 0;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_HTTPS_REQUEST_H_
