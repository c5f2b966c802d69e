// HttpTransport: how the Kubernetes client talks HTTP. The one seam between
// the client and the network; CpprestTransport is the real one, tests may
// substitute their own (for example to feed malformed watch streams).
//
// Implementations are thread-safe. An HttpStream is read by one thread;
// Cancel() may be called from any thread.
#ifndef KUBETRAIN_OPERATOR_KUBE_HTTP_TRANSPORT_H_
#define KUBETRAIN_OPERATOR_KUBE_HTTP_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kubetrain::kube {

struct HttpRequest {
  std::string method;        // "GET", "POST", "PUT", "PATCH", "DELETE"
  std::string target;        // path and query, already escaped: "/api/v1/pods?limit=5"
  std::string content_type;  // for a body; "" when none
  std::string body;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header, "" when absent
};

// A streaming response body (watch).
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // The next complete line, without its '\n'. Returns true with *line set,
  // false at a clean end of stream, or an error (dropped connection, idle
  // timeout, cancellation).
  virtual absl::StatusOr<bool> ReadLine(std::string* line) = 0;
  // Makes a blocked ReadLine return promptly with an error. Thread-safe.
  virtual void Cancel() = 0;
};

struct StreamResponse {
  int status = 0;
  std::unique_ptr<HttpStream> stream;  // set when status is 2xx
  HttpResponse error;                  // the whole answer when status is not 2xx
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Any HTTP answer is a response (4xx and 5xx included); only "no answer"
  // (refused, reset, TLS failure, timeout) is an error.
  virtual absl::StatusOr<HttpResponse> Send(const HttpRequest& request) = 0;
  // Returns once the response headers have arrived. `idle_timeout` bounds
  // the wait for each piece of the body.
  virtual absl::StatusOr<StreamResponse> OpenStream(const HttpRequest& request,
                                                    absl::Duration idle_timeout) = 0;
  // Base URL, for messages ("https://10.0.0.1:443").
  virtual std::string Server() const = 0;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_HTTP_TRANSPORT_H_
