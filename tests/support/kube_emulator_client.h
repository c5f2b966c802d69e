// Tiny libcurl HTTP client for tests that drive the Kubernetes API emulator
// (or a real apiserver): one-shot requests, and watch streams collected line by
// line on a background thread.
//
// TestHttp is stateless and thread-safe. WatchStream is thread-safe; its
// destructor stops the transfer and joins the thread.
#ifndef KUBETRAIN_TESTS_SUPPORT_KUBE_EMULATOR_CLIENT_H_
#define KUBETRAIN_TESTS_SUPPORT_KUBE_EMULATOR_CLIENT_H_

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kubetrain::testing {

struct HttpReply {
  long code = 0;  // 0: transport error
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string error;                           // curl's message on transport errors
  // Body parsed as JSON (discarded value if it is not JSON).
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
};

struct HttpCall {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::string> headers;  // "Name: value"
  std::string user_agent = "kubetrain-test/0.1";
  absl::Duration timeout = absl::Seconds(30);
};

HttpReply Fetch(const HttpCall& call);

// Convenience wrappers against a base URL.
HttpReply Get(const std::string& url);
HttpReply Send(const std::string& method, const std::string& url, const std::string& body,
               const std::string& content_type = "application/json");

class WatchStream {
 public:
  // Starts GET `url` (which should carry watch=1) in the background.
  explicit WatchStream(std::string url, std::vector<std::string> headers = {});
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // Waits until at least `n` lines arrived or the stream ended; true if >= n.
  bool WaitForLines(size_t n, absl::Duration timeout);
  // Waits until the transfer finished; false on timeout.
  bool WaitForEnd(absl::Duration timeout);
  std::vector<std::string> Lines() const;
  std::vector<nlohmann::json> Events() const;  // lines parsed as JSON
  bool ended() const;
  // After the end: true when the server finished the chunked body properly,
  // false when the connection was cut (curl reports a partial transfer).
  bool clean_end() const;
  long code() const;
  std::string body() const;  // everything received (for non-200 answers)
  void Stop();               // abort the transfer

 private:
  static size_t OnData(char* data, size_t size, size_t n, void* self);
  static int OnProgress(void* self, long, long, long, long);

  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  std::string partial_ ABSL_GUARDED_BY(mu_);
  std::string all_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool clean_ ABSL_GUARDED_BY(mu_) = false;
  long code_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTS_SUPPORT_KUBE_EMULATOR_CLIENT_H_
