#include "operator/kube/kube_client.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "operator/kube/api_error.h"
#include "operator/kube/backoff.h"
#include "operator/kube/object.h"

namespace kubetrain::kube {
namespace {

constexpr char kJson[] = "application/json";
constexpr char kMergePatch[] = "application/merge-patch+json";

// Request bodies: a string cut in the middle of a UTF-8 sequence (messages
// are shortened by bytes) is sent with U+FFFD, not thrown from dump().
std::string Dump(const Json& body) {
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string Shorten(absl::string_view text, size_t max = 160) {
  if (text.size() <= max) return std::string(text);
  return absl::StrCat(text.substr(0, max), "...");
}

absl::StatusOr<Json> ParseBody(const HttpRequest& request, const std::string& body) {
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return DecodeError(absl::StrCat(request.method, " ", request.target),
                       absl::StrCat("not JSON: ", Shorten(body)));
  }
  return parsed;
}

}  // namespace

absl::string_view WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
  }
  return "?";
}

absl::StatusOr<WatchEvent> DecodeWatchLine(absl::string_view line) {
  Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return DecodeError("watch", absl::StrCat("malformed event line: ", Shorten(line)));
  }
  auto type = parsed.find("type");
  auto object = parsed.find("object");
  if (type == parsed.end() || !type->is_string() || object == parsed.end() ||
      !object->is_object()) {
    return DecodeError("watch", absl::StrCat("event without type or object: ", Shorten(line)));
  }
  const std::string name = type->get<std::string>();
  WatchEvent event;
  if (name == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (name == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (name == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (name == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (name == "ERROR") {
    const int code = static_cast<int>(IntAt(*object, {"code"}, 500));
    return StatusFromHttp(code, Dump(*object), "", "watch ERROR event");
  } else {
    return DecodeError("watch", absl::StrCat("unknown event type \"", name, "\""));
  }
  event.object = std::move(*object);
  return event;
}

WatchStream::WatchStream(std::unique_ptr<HttpStream> stream, std::string what)
    : stream_(std::move(stream)), what_(std::move(what)) {}

absl::StatusOr<bool> WatchStream::Next(WatchEvent* event) {
  std::string line;
  while (true) {
    absl::StatusOr<bool> got = stream_->ReadLine(&line);
    if (!got.ok()) {
      if (absl::IsCancelled(got.status())) return got.status();
      return NetworkError(what_, got.status().message());
    }
    if (!*got) return false;
    if (line.empty() || line == "\r") continue;
    absl::StatusOr<WatchEvent> decoded = DecodeWatchLine(line);
    if (!decoded.ok()) return decoded.status();
    *event = *std::move(decoded);
    return true;
  }
}

void WatchStream::Cancel() { stream_->Cancel(); }

KubeClient::KubeClient(std::unique_ptr<HttpTransport> transport, RetryPolicy retry)
    : transport_(std::move(transport)), retry_(retry) {}

ClientStats KubeClient::Stats() const {
  return ClientStats{requests_.load(), retries_.load(), errors_.load()};
}

absl::StatusOr<Json> KubeClient::Call(const HttpRequest& request, bool idempotent) {
  absl::StatusOr<std::string> body = CallRaw(request, idempotent);
  if (!body.ok()) return body.status();
  return ParseBody(request, *body);
}

absl::StatusOr<std::string> KubeClient::CallRaw(const HttpRequest& request, bool idempotent) {
  Backoff backoff(retry_.initial_backoff, retry_.max_backoff);
  std::string what = absl::StrCat(request.method, " ", request.target);
  absl::Status last;
  for (int attempt = 1;; ++attempt) {
    ++requests_;
    absl::StatusOr<HttpResponse> response = transport_->Send(request);
    absl::Duration wait;
    if (!response.ok()) {
      last = NetworkError(what, response.status().message());
      if (!idempotent || attempt >= retry_.max_attempts) break;
      wait = backoff.Next();
    } else if (response->status >= 200 && response->status < 300) {
      return std::move(response->body);
    } else {
      last = StatusFromHttp(response->status, response->body, response->retry_after, what);
      if (!IsRetryable(last) || attempt >= retry_.max_attempts) break;
      std::optional<absl::Duration> after = RetryAfter(last);
      wait = after ? std::min(*after, retry_.max_retry_after) : backoff.Next();
    }
    ++retries_;
    absl::SleepFor(wait);
  }
  ++errors_;
  return last;
}

absl::StatusOr<Json> KubeClient::Create(const ResourceType& type, absl::string_view ns,
                                        const Json& object) {
  Json body = object;
  body["apiVersion"] = type.ApiVersion();
  body["kind"] = std::string(type.kind);
  return Call(HttpRequest{"POST", ResourcePath(type, ns), kJson, Dump(body)},
              /*idempotent=*/false);
}

absl::StatusOr<Json> KubeClient::CreateSubresource(const ResourceType& type, absl::string_view ns,
                                                   absl::string_view name,
                                                   absl::string_view subresource,
                                                   const Json& body) {
  return Call(HttpRequest{"POST", ResourcePath(type, ns, name, subresource), kJson, Dump(body)},
              /*idempotent=*/false);
}

absl::StatusOr<Json> KubeClient::Get(const ResourceType& type, absl::string_view ns,
                                     absl::string_view name) {
  return Call(HttpRequest{"GET", ResourcePath(type, ns, name), "", ""}, /*idempotent=*/true);
}

absl::StatusOr<ObjectList> KubeClient::List(const ResourceType& type, absl::string_view ns,
                                            const ListOptions& options) {
  std::string target =
      absl::StrCat(ResourcePath(type, ns),
                   QueryString({{"labelSelector", options.label_selector},
                                {"fieldSelector", options.field_selector},
                                {"limit", options.limit > 0 ? absl::StrCat(options.limit) : ""},
                                {"continue", options.continue_token},
                                {"resourceVersion", options.resource_version}}));
  HttpRequest request{"GET", target, "", ""};
  absl::StatusOr<Json> body = Call(request, /*idempotent=*/true);
  if (!body.ok()) return body.status();
  if (!body->is_object() || !body->contains("items")) {
    return DecodeError(absl::StrCat("GET ", target), "a list without items");
  }
  ObjectList list;
  const Json& items = (*body)["items"];
  if (items.is_array()) {
    list.items.reserve(items.size());
    for (const Json& item : items) list.items.push_back(item);
  }
  list.resource_version = StringAt(*body, {"metadata", "resourceVersion"});
  list.continue_token = StringAt(*body, {"metadata", "continue"});
  if (body->contains("metadata") && (*body)["metadata"].is_object()) {
    const Json& meta = (*body)["metadata"];
    if (meta.contains("remainingItemCount") && meta["remainingItemCount"].is_number()) {
      list.remaining_item_count = meta["remainingItemCount"].get<int64_t>();
    }
  }
  // Items of a list carry no kind/apiVersion; give them back so cached
  // objects look like the ones a GET returns.
  for (Json& item : list.items) {
    if (item.is_object()) {
      if (!item.contains("kind")) item["kind"] = std::string(type.kind);
      if (!item.contains("apiVersion")) item["apiVersion"] = type.ApiVersion();
    }
  }
  return list;
}

absl::StatusOr<ObjectList> KubeClient::ListAll(const ResourceType& type, absl::string_view ns,
                                               ListOptions options, int64_t page_size,
                                               const std::function<void(Json&)>& each) {
  bool restarted = false;
  ObjectList all;
  options.limit = page_size;
  options.continue_token.clear();
  while (true) {
    absl::StatusOr<ObjectList> page = List(type, ns, options);
    if (!page.ok()) {
      if (IsGone(page.status()) && !options.continue_token.empty() && !restarted) {
        // The continue token expired: start over once, from the latest state.
        restarted = true;
        all = ObjectList();
        options.continue_token.clear();
        options.resource_version.clear();
        continue;
      }
      return page.status();
    }
    for (Json& item : page->items) {
      if (each) each(item);
      all.items.push_back(std::move(item));
    }
    if (all.resource_version.empty()) all.resource_version = page->resource_version;
    if (page->continue_token.empty()) break;
    options.continue_token = page->continue_token;
    options.resource_version.clear();  // not allowed together with continue
  }
  return all;
}

absl::StatusOr<Json> KubeClient::Update(const ResourceType& type, const Json& object) {
  Json body = object;
  body["apiVersion"] = type.ApiVersion();
  body["kind"] = std::string(type.kind);
  return Call(
      HttpRequest{"PUT", ResourcePath(type, Namespace(object), Name(object)), kJson, Dump(body)},
      /*idempotent=*/true);
}

absl::StatusOr<Json> KubeClient::UpdateStatus(const ResourceType& type, const Json& object) {
  Json body = object;
  body["apiVersion"] = type.ApiVersion();
  body["kind"] = std::string(type.kind);
  return Call(HttpRequest{"PUT", ResourcePath(type, Namespace(object), Name(object), "status"),
                          kJson, Dump(body)},
              /*idempotent=*/true);
}

absl::StatusOr<Json> KubeClient::MergePatch(const ResourceType& type, absl::string_view ns,
                                            absl::string_view name, const Json& patch,
                                            absl::string_view subresource) {
  return Call(
      HttpRequest{"PATCH", ResourcePath(type, ns, name, subresource), kMergePatch, Dump(patch)},
      /*idempotent=*/false);
}

absl::StatusOr<Json> KubeClient::Delete(const ResourceType& type, absl::string_view ns,
                                        absl::string_view name, const DeleteOptions& options) {
  Json body{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (options.precondition_uid || options.precondition_resource_version) {
    Json pre = Json::object();
    if (options.precondition_uid) pre["uid"] = *options.precondition_uid;
    if (options.precondition_resource_version) {
      pre["resourceVersion"] = *options.precondition_resource_version;
    }
    body["preconditions"] = pre;
  }
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  return Call(HttpRequest{"DELETE", ResourcePath(type, ns, name), kJson, Dump(body)},
              /*idempotent=*/false);
}

absl::StatusOr<std::unique_ptr<WatchStream>> KubeClient::Watch(const ResourceType& type,
                                                               absl::string_view ns,
                                                               const WatchOptions& options) {
  std::string target = absl::StrCat(
      ResourcePath(type, ns),
      QueryString({{"watch", "1"},
                   {"labelSelector", options.label_selector},
                   {"fieldSelector", options.field_selector},
                   {"resourceVersion", options.resource_version},
                   {"timeoutSeconds",
                    options.timeout_seconds > 0 ? absl::StrCat(options.timeout_seconds) : ""},
                   {"allowWatchBookmarks", options.allow_bookmarks ? "true" : ""}}));
  std::string what = absl::StrCat("GET ", target);
  // The idle timeout must exceed the watch's own length: bookmarks may only
  // come near its end (cpprestsdk notes).
  absl::Duration idle =
      absl::Seconds(options.timeout_seconds > 0 ? options.timeout_seconds : 1800) +
      absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<HttpStream>> stream = OpenGetStream(target, idle);
  if (!stream.ok()) return stream.status();
  return std::make_unique<WatchStream>(*std::move(stream), what);
}

absl::StatusOr<std::string> KubeClient::GetText(absl::string_view target) {
  return CallRaw(HttpRequest{"GET", std::string(target), "", ""}, /*idempotent=*/true);
}

absl::StatusOr<std::unique_ptr<HttpStream>> KubeClient::StreamText(absl::string_view target,
                                                                   absl::Duration idle_timeout) {
  return OpenGetStream(std::string(target), idle_timeout);
}

absl::StatusOr<std::unique_ptr<HttpStream>> KubeClient::OpenGetStream(const std::string& target,
                                                                      absl::Duration idle_timeout) {
  const std::string what = absl::StrCat("GET ", target);
  ++requests_;
  absl::StatusOr<StreamResponse> response =
      transport_->OpenStream(HttpRequest{"GET", target, "", ""}, idle_timeout);
  if (!response.ok()) {
    ++errors_;
    return NetworkError(what, response.status().message());
  }
  if (response->status < 200 || response->status >= 300) {
    ++errors_;
    return StatusFromHttp(response->status, response->error.body, response->error.retry_after,
                          what);
  }
  return std::move(response->stream);
}

}  // namespace kubetrain::kube
