#include "tests/support/kube_emulator_client.h"

#include <curl/curl.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::testing {
namespace {

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

size_t AppendHeader(char* data, size_t size, size_t n, void* out) {
  std::string line(data, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    (*static_cast<std::map<std::string, std::string>*>(
        out))[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

void EnsureCurl() {
  static CurlGlobal* init = new CurlGlobal();
  (void)init;
}

}  // namespace

HttpReply Fetch(const HttpCall& call) {
  EnsureCurl();
  HttpReply reply;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    reply.error = "curl_easy_init failed";
    return reply;
  }
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!call.body.empty() || call.method == "POST" || call.method == "PUT" ||
      call.method == "PATCH") {
    headers = curl_slist_append(headers, absl::StrCat("Content-Type: ", call.content_type).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  for (const std::string& h : call.headers) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, call.url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  if (!call.body.empty() || call.method == "POST" || call.method == "PUT" ||
      call.method == "PATCH") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, call.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(call.body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, call.user_agent.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, AppendHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply.headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(call.timeout)));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.code);
  } else {
    reply.error = curl_easy_strerror(rc);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return reply;
}

HttpReply Get(const std::string& url) {
  HttpCall call;
  call.url = url;
  return Fetch(call);
}

HttpReply Send(const std::string& method, const std::string& url, const std::string& body,
               const std::string& content_type) {
  HttpCall call;
  call.method = method;
  call.url = url;
  call.body = body;
  call.content_type = content_type;
  return Fetch(call);
}

WatchStream::WatchStream(std::string url, std::vector<std::string> headers) {
  EnsureCurl();
  thread_ = std::thread([this, url = std::move(url), headers = std::move(headers)] {
    CURL* curl = curl_easy_init();
    curl_slist* hs = curl_slist_append(nullptr, "Accept: application/json");
    for (const std::string& h : headers) hs = curl_slist_append(hs, h.c_str());
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "kubetrain-test/0.1");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &WatchStream::OnData);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &WatchStream::OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, this);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 600000L);
    CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hs);
    curl_easy_cleanup(curl);
    absl::MutexLock lock(&mu_);
    if (!partial_.empty()) lines_.push_back(std::move(partial_));
    ended_ = true;
    clean_ = rc == CURLE_OK;
    code_ = code;
  });
}

WatchStream::~WatchStream() {
  Stop();
  thread_.join();
}

void WatchStream::Stop() { stop_.store(true); }

size_t WatchStream::OnData(char* data, size_t size, size_t n, void* self) {
  auto* w = static_cast<WatchStream*>(self);
  absl::MutexLock lock(&w->mu_);
  w->all_.append(data, size * n);
  w->partial_.append(data, size * n);
  size_t pos;
  while ((pos = w->partial_.find('\n')) != std::string::npos) {
    w->lines_.push_back(w->partial_.substr(0, pos));
    w->partial_.erase(0, pos + 1);
  }
  return size * n;
}

int WatchStream::OnProgress(void* self, long, long, long, long) {
  return static_cast<WatchStream*>(self)->stop_.load() ? 1 : 0;
}

bool WatchStream::WaitForLines(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, n]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return lines_.size() >= n || ended_; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  return lines_.size() >= n;
}

bool WatchStream::WaitForEnd(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; };
  return mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
}

std::vector<std::string> WatchStream::Lines() const {
  absl::MutexLock lock(&mu_);
  return lines_;
}

std::vector<nlohmann::json> WatchStream::Events() const {
  std::vector<nlohmann::json> out;
  for (const std::string& line : Lines())
    out.push_back(nlohmann::json::parse(line, nullptr, false));
  return out;
}

bool WatchStream::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

bool WatchStream::clean_end() const {
  absl::MutexLock lock(&mu_);
  return clean_;
}

long WatchStream::code() const {
  absl::MutexLock lock(&mu_);
  return code_;
}

std::string WatchStream::body() const {
  absl::MutexLock lock(&mu_);
  return all_;
}

}  // namespace kubetrain::testing
