// KubeletServer: the node agent's HTTPS listener on the kubelet's port, to
// which kube-apiserver (and the API emulator) send pods/log as the kubelet's
// /containerLogs (kubelet_endpoints.h). kube-apiserver dials the Node's
// address and status.daemonEndpoints.kubeletEndpoint.Port over TLS and, with
// no --kubelet-certificate-authority, does not verify the certificate, so a
// self-signed one serves.
//
// OpenSSL on a plain socket: one thread per connection, one GET per
// connection (Connection: close), the answer chunked so a follow streams;
// a handler notices a client that went away (KubeletReply::Gone).
//
// Thread-safe. Stop() (also the destructor) closes the listener, shuts every
// connection down and joins its threads: a handler returns once its reply's
// Write or Gone says the client is gone.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_SERVER_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tools/node_agent/kubelet_request.h"

struct ssl_ctx_st;

namespace kubetrain::node_agent {

struct KubeletServerOptions {
  std::string host = "127.0.0.1";  // an IPv4 address to bind
  int port = 0;                    // 0: any free port
  std::string cert_file;           // PEM certificate (chain)
  std::string key_file;            // PEM private key
};

class KubeletServer {
 public:
  using Handler = std::function<void(const KubeletRequest&, KubeletReply&)>;

  static absl::StatusOr<std::unique_ptr<KubeletServer>> Start(const KubeletServerOptions& options,
                                                              Handler handler);
  ~KubeletServer();
  KubeletServer(const KubeletServer&) = delete;
  KubeletServer& operator=(const KubeletServer&) = delete;

  int port() const { return port_; }
  void Stop();

 private:
  struct Conn {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    int fd = -1;
  };

  KubeletServer(ssl_ctx_st* ctx, int listen_fd, int port, Handler handler);
  void AcceptLoop();
  void Serve(int fd);

  ssl_ctx_st* const ctx_;
  const int listen_fd_;
  const int port_;
  Handler handler_;
  int wake_pipe_[2] = {-1, -1};
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Conn> conns_ ABSL_GUARDED_BY(mu_);
};

// Percent-decoding ('+' is a space in a query).
std::string PercentDecode(std::string_view s, bool plus_is_space);

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_SERVER_H_
