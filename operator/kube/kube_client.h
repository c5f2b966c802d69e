// KubeClient: typed REST calls on the resources of resource.h, objects as
// JSON. Create, get, list (selectors, limit/continue pagination), update
// with resourceVersion (409 Conflict surfaced as IsConflict), /status
// updates, merge patches, delete with propagationPolicy and preconditions,
// and watches (WatchStream). Bodies that are not Kubernetes objects (a
// pod's log, a pod's page through the API server's proxy) are read with
// GetText, or line by line as they come with StreamText.
//
// Failures are typed Status values (api_error.h). 429 and 5xx answers are
// retried, waiting as long as Retry-After says (capped) or with jittered
// exponential backoff; GETs are also retried after network errors. Other
// verbs are not retried after a network error because the server may have
// applied them.
//
// Thread-safe: one client serves every informer and worker.
#ifndef KUBETRAIN_OPERATOR_KUBE_KUBE_CLIENT_H_
#define KUBETRAIN_OPERATOR_KUBE_KUBE_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "operator/kube/http_transport.h"
#include "operator/kube/resource.h"

namespace kubetrain::kube {

using Json = nlohmann::json;

struct RetryPolicy {
  int max_attempts = 5;  // including the first
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  absl::Duration max_retry_after = absl::Seconds(10);  // cap on a server's Retry-After
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;             // 0: no limit
  std::string continue_token;    // from a previous page
  std::string resource_version;  // "" = most recent; "0" = any (served from cache)
};

struct ObjectList {
  std::vector<Json> items;
  std::string resource_version;
  std::string continue_token;  // "" on the last page
  std::optional<int64_t> remaining_item_count;
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // events after this version
  int timeout_seconds = 0;       // 0: the server's default
  bool allow_bookmarks = true;
};

struct DeleteOptions {
  std::string propagation_policy;  // "", "Background", "Foreground", "Orphan"
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  std::optional<int64_t> grace_period_seconds;
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };
absl::string_view WatchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  Json object;
};

// Decodes one line of a watch stream. ERROR events become their Status
// (an expired version is IsGone); a malformed line is a kDecode error that
// quotes it (shortened).
absl::StatusOr<WatchEvent> DecodeWatchLine(absl::string_view line);

// One open watch. Next() from one thread; Cancel() from any.
class WatchStream {
 public:
  explicit WatchStream(std::unique_ptr<HttpStream> stream, std::string what);
  // true with *event set; false at a clean end of stream (timeoutSeconds
  // reached); or an error: network (dropped connection), decode (bad line),
  // or the Status of an ERROR event (410 Gone when the version expired).
  absl::StatusOr<bool> Next(WatchEvent* event);
  void Cancel();

 private:
  std::unique_ptr<HttpStream> stream_;
  std::string what_;
};

// Client-side request counters, for metrics and tests.
struct ClientStats {
  int64_t requests = 0;
  int64_t retries = 0;
  int64_t errors = 0;
};

class KubeClient {
 public:
  explicit KubeClient(std::unique_ptr<HttpTransport> transport, RetryPolicy retry = {});
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  absl::StatusOr<Json> Create(const ResourceType& type, absl::string_view ns, const Json& object);
  // POST to an object's subresource, e.g. pods/<name>/binding; `body` is sent
  // as given.
  absl::StatusOr<Json> CreateSubresource(const ResourceType& type, absl::string_view ns,
                                         absl::string_view name, absl::string_view subresource,
                                         const Json& body);
  absl::StatusOr<Json> Get(const ResourceType& type, absl::string_view ns, absl::string_view name);
  // One page.
  absl::StatusOr<ObjectList> List(const ResourceType& type, absl::string_view ns,
                                  const ListOptions& options = {});
  // Every page (following continue tokens) with `page_size` items per request.
  // A continue token that expires mid-way (410) restarts the list once.
  // `each`, when set, is applied to every item as its page arrives (an
  // informer's transform: only one page is ever held untrimmed).
  absl::StatusOr<ObjectList> ListAll(const ResourceType& type, absl::string_view ns,
                                     ListOptions options = {}, int64_t page_size = 500,
                                     const std::function<void(Json&)>& each = nullptr);
  // PUT. The object's metadata.resourceVersion makes it conditional: a stale
  // one gives IsConflict.
  absl::StatusOr<Json> Update(const ResourceType& type, const Json& object);
  // PUT on /status: only status is written.
  absl::StatusOr<Json> UpdateStatus(const ResourceType& type, const Json& object);
  // RFC 7386 merge patch (application/merge-patch+json); `subresource` "" or
  // "status".
  absl::StatusOr<Json> MergePatch(const ResourceType& type, absl::string_view ns,
                                  absl::string_view name, const Json& patch,
                                  absl::string_view subresource = "");
  // The answer: the object (still present while finalizers or graceful
  // deletion run) or a Status.
  absl::StatusOr<Json> Delete(const ResourceType& type, absl::string_view ns,
                              absl::string_view name, const DeleteOptions& options = {});
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(const ResourceType& type, absl::string_view ns,
                                                     const WatchOptions& options);
  // GET of `target` (path and escaped query) whose 2xx body is returned as
  // it came, not parsed: pods/<name>/log, pods/<name>:<port>/proxy/<path>.
  // Retried as Get is; a non-2xx answer is its typed Status.
  absl::StatusOr<std::string> GetText(absl::string_view target);
  // GET of `target` whose body is read line by line as it arrives
  // (pods/<name>/log?follow=true). Not retried: a stream that broke is
  // reopened by the caller, who knows where it stopped. `idle_timeout`
  // bounds the wait for each piece of the body. A non-2xx answer is its
  // typed Status.
  absl::StatusOr<std::unique_ptr<HttpStream>> StreamText(absl::string_view target,
                                                         absl::Duration idle_timeout);

  ClientStats Stats() const;
  const HttpTransport& transport() const { return *transport_; }

 private:
  absl::StatusOr<Json> Call(const HttpRequest& request, bool idempotent);
  // Call's retries, without parsing the body.
  absl::StatusOr<std::string> CallRaw(const HttpRequest& request, bool idempotent);
  // A GET whose body is read as it comes (Watch, StreamText): counted, and a
  // non-2xx answer or a network error as a typed status, once (no retry).
  absl::StatusOr<std::unique_ptr<HttpStream>> OpenGetStream(const std::string& target,
                                                            absl::Duration idle_timeout);

  std::unique_ptr<HttpTransport> transport_;
  const RetryPolicy retry_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> retries_{0};
  std::atomic<int64_t> errors_{0};
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_KUBE_CLIENT_H_
