// EmulatorHttpServer: a minimal HTTP/1.1 server on 127.0.0.1 for the test
// Kubernetes API emulator. One thread per connection, keep-alive, request
// bodies by Content-Length. The handler writes raw response bytes, so it
// controls framing exactly (Content-Length or chunked, as kube-apiserver does),
// can notice a client that went away (PeerClosed) and can drop a connection
// abruptly (Abort) - the reasons this is not civetweb, which hides the socket.
//
// Thread-safe. Stop() (also run by the destructor) closes the listener, shuts
// every connection down and joins all threads; handlers must return promptly
// once their connection fails or is aborted.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_HTTP_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_HTTP_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kubetrain::testing {

struct HttpRequest {
  std::string method;
  std::string target;                          // path?query as sent
  std::string path;                            // percent-decoded path
  std::map<std::string, std::string> query;    // decoded; last value wins
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string Header(const std::string& lower_name) const;
};

// One client connection, as seen by a handler. Thread-compatible; Abort() may
// be called from any thread.
class HttpConnection {
 public:
  explicit HttpConnection(int fd) : fd_(fd) {}
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Writes all bytes; false when the connection failed or was aborted.
  bool Write(std::string_view bytes);
  // True when the peer closed (or reset) the connection; waits up to `wait`.
  bool PeerClosed(absl::Duration wait);
  // Shuts the socket down: the client sees the connection end mid-response.
  void Abort();
  bool aborted() const { return aborted_.load(); }
  // After the handler returns, the connection is closed instead of reused.
  void CloseAfterResponse() { close_after_ = true; }
  bool close_after() const { return close_after_; }

 private:
  int fd_;
  std::atomic<bool> aborted_{false};
  bool close_after_ = false;
};

class EmulatorHttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpConnection&)>;

  static absl::StatusOr<std::unique_ptr<EmulatorHttpServer>> Start(int port, Handler handler);
  ~EmulatorHttpServer();
  EmulatorHttpServer(const EmulatorHttpServer&) = delete;
  EmulatorHttpServer& operator=(const EmulatorHttpServer&) = delete;

  int port() const { return port_; }
  void Stop();

 private:
  struct Conn {
    std::thread thread;
    std::shared_ptr<HttpConnection> connection;
    std::shared_ptr<std::atomic<bool>> done;
    int fd = -1;
  };

  EmulatorHttpServer(int listen_fd, int port, Handler handler);
  void AcceptLoop();
  void Serve(int fd, std::shared_ptr<HttpConnection> connection);

  const int listen_fd_;
  const int port_;
  Handler handler_;
  int wake_pipe_[2] = {-1, -1};
  std::thread accept_thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Conn> conns_ ABSL_GUARDED_BY(mu_);
};

// Percent-decoding of URL paths and query values ('+' is a space in queries).
std::string UrlDecode(std::string_view s, bool plus_is_space);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_HTTP_H_
