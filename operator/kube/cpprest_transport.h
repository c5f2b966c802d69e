// CpprestTransport: HttpTransport over cpprestsdk (http_client), with TLS
// verified against the configured CA (or the system roots), optional client
// certificates and bearer tokens from a BearerTokenSource.
//
// Facts this relies on (../shared/notes/cpprestsdk-for-kubernetes.md):
// request() completes when the headers arrive and the body can then be read
// as chunks come; the client's timeout is an idle timeout, so watches get
// their own client whose timeout exceeds the watch's timeoutSeconds;
// cancelling a token makes a blocked read fail within milliseconds.
// cpprest runs its own thread pool; this class only blocks (.get()) on the
// caller's thread, never inside a continuation.
//
// Thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_CPPREST_TRANSPORT_H_
#define KUBETRAIN_OPERATOR_KUBE_CPPREST_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/kube/http_transport.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/token_source.h"

namespace kubetrain::kube {

struct TransportOptions {
  absl::Duration request_timeout = absl::Seconds(30);
  std::string user_agent = "kubetrain-operator/0.1";
};

class CpprestTransport final : public HttpTransport {
 public:
  // Checks the configuration (URL, PEM blocks) and returns a clear error
  // naming the bad part. Borrows `env` and `clock` (token file re-reads).
  static absl::StatusOr<std::unique_ptr<CpprestTransport>> Create(const KubeConfig& config,
                                                                  const TransportOptions& options,
                                                                  const ConfigEnvironment& env,
                                                                  const Clock& clock);
  ~CpprestTransport() override;

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override;
  absl::StatusOr<StreamResponse> OpenStream(const HttpRequest& request,
                                            absl::Duration idle_timeout) override;
  std::string Server() const override;

 private:
  struct Impl;
  explicit CpprestTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_CPPREST_TRANSPORT_H_
