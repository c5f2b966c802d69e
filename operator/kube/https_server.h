// HttpsServer: an HTTPS listener that kube-apiserver calls: the node agent's
// kubelet port (pods/log as the kubelet's /containerLogs,
// tools/node_agent/kubelet_endpoints.h; kube-apiserver does not verify that
// certificate without --kubelet-certificate-authority) and the operator's
// validating admission webhook (operator/webhook/; kube-apiserver verifies it
// against the configuration's caBundle).
//
// OpenSSL on a plain socket: one thread per connection, one request per
// connection (Connection: close), its body read by Content-Length (a chunked
// request body is refused with 411); an answer is whole (Respond, Fail) or
// chunked so a follow streams (Write); a handler notices a client that went
// away (HttpsReply::Gone).
//
// Thread-safe. Stop() (also the destructor) closes the listener, shuts every
// connection down and joins its threads: a handler returns once its reply's
// Write or Gone says the client is gone.
#ifndef KUBETRAIN_OPERATOR_KUBE_HTTPS_SERVER_H_
#define KUBETRAIN_OPERATOR_KUBE_HTTPS_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "operator/kube/https_request.h"

struct ssl_ctx_st;

namespace kubetrain::kube {

struct HttpsServerOptions {
  std::string host = "127.0.0.1";  // an IPv4 address to bind ("0.0.0.0": every interface)
  int port = 0;                    // 0: any free port
  // The certificate (chain) and private key, as PEM files (loaded again
  // for new connections when they change), or else as PEM text (cert_pem,
  // key_pem).
  std::string cert_file;
  std::string key_file;
  std::string cert_pem;
  std::string key_pem;
  size_t max_body_bytes = 8 << 20;  // a longer body: 413
};

class HttpsServer {
 public:
  using Handler = std::function<void(const HttpsRequest&, HttpsReply&)>;

  static absl::StatusOr<std::unique_ptr<HttpsServer>> Start(const HttpsServerOptions& options,
                                                            Handler handler);
  ~HttpsServer();
  HttpsServer(const HttpsServer&) = delete;
  HttpsServer& operator=(const HttpsServer&) = delete;

  int port() const { return port_; }
  // How many times changed certificate files were loaded again.
  int reloads() const;
  void Stop();

 private:
  struct Conn {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    int fd = -1;
  };

  HttpsServer(ssl_ctx_st* ctx, int listen_fd, int port, const HttpsServerOptions& options,
              Handler handler);
  // The context for a new connection (a reference the caller frees), after
  // reloading certificate files that changed.
  ssl_ctx_st* Context();
  void AcceptLoop();
  void Serve(int fd);

  const HttpsServerOptions options_;
  const int listen_fd_;
  const int port_;
  const size_t max_body_bytes_;
  Handler handler_;
  mutable absl::Mutex ctx_mu_;
  ssl_ctx_st* ctx_ ABSL_GUARDED_BY(ctx_mu_);
  std::string stamps_ ABSL_GUARDED_BY(ctx_mu_);  // the files' times when ctx_ was loaded
  int reloads_ ABSL_GUARDED_BY(ctx_mu_) = 0;
  int wake_pipe_[2] = {-1, -1};
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Conn> conns_ ABSL_GUARDED_BY(mu_);
};

// Percent-decoding ('+' is a space in a query).
std::string PercentDecode(std::string_view s, bool plus_is_space);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_HTTPS_SERVER_H_
