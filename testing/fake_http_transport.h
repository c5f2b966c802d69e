// FakeHttpTransport: an HttpTransport whose answers a test scripts, for
// client behaviour the API emulator cannot produce (malformed watch lines,
// network failures at chosen moments). Thread-safe.
#ifndef KUBETRAIN_TESTING_FAKE_HTTP_TRANSPORT_H_
#define KUBETRAIN_TESTING_FAKE_HTTP_TRANSPORT_H_

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "operator/kube/http_transport.h"

namespace kubetrain::kube {

// Lines, then a clean end (or `final_error` when set).
class ScriptedStream final : public HttpStream {
 public:
  ScriptedStream(std::vector<std::string> lines, absl::Status final_error)
      : lines_(lines.begin(), lines.end()), final_error_(std::move(final_error)) {}
  absl::StatusOr<bool> ReadLine(std::string* line) override {
    if (lines_.empty()) {
      if (!final_error_.ok()) return final_error_;
      return false;
    }
    *line = lines_.front();
    lines_.pop_front();
    return true;
  }
  void Cancel() override {}

 private:
  std::deque<std::string> lines_;
  absl::Status final_error_;
};

class FakeHttpTransport final : public HttpTransport {
 public:
  using Handler = std::function<absl::StatusOr<HttpResponse>(const HttpRequest&)>;
  using StreamHandler = std::function<absl::StatusOr<StreamResponse>(const HttpRequest&)>;

  void OnSend(Handler handler) {
    absl::MutexLock lock(&mu_);
    send_ = std::move(handler);
  }
  void OnStream(StreamHandler handler) {
    absl::MutexLock lock(&mu_);
    stream_ = std::move(handler);
  }
  std::vector<HttpRequest> Requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    Handler handler;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(request);
      handler = send_;
    }
    if (!handler) return absl::UnavailableError("no handler");
    return handler(request);
  }
  absl::StatusOr<StreamResponse> OpenStream(const HttpRequest& request, absl::Duration) override {
    StreamHandler handler;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(request);
      handler = stream_;
    }
    if (!handler) return absl::UnavailableError("no stream handler");
    return handler(request);
  }
  std::string Server() const override { return "fake://"; }

 private:
  mutable absl::Mutex mu_;
  Handler send_ ABSL_GUARDED_BY(mu_);
  StreamHandler stream_ ABSL_GUARDED_BY(mu_);
  std::vector<HttpRequest> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_TESTING_FAKE_HTTP_TRANSPORT_H_
