#include "operator/kube/informer.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/backoff.h"
#include "operator/kube/object.h"

namespace kubetrain::kube {

void StripServerBookkeeping(nlohmann::json& object) {
  if (!object.is_object() || !object.contains("metadata")) return;
  Json& meta = object["metadata"];
  if (!meta.is_object()) return;
  meta.erase("managedFields");
  if (meta.contains("annotations") && meta["annotations"].is_object()) {
    meta["annotations"].erase("kubectl.kubernetes.io/last-applied-configuration");
    if (meta["annotations"].empty()) meta.erase("annotations");
  }
}

Informer::Informer(KubeClient& client, const ResourceType& type, InformerOptions options,
                   const Clock& clock, Logger* logger)
    : client_(client),
      type_(type),
      options_(std::move(options)),
      logger_(logger),
      name_(absl::StrCat("informer/", type.plural, options_.namespace_name.empty() ? "" : "@",
                         options_.namespace_name)),
      waiter_(clock, &mu_) {}

Informer::~Informer() { Stop(); }

void Informer::AddHandlers(InformerHandlers handlers) {
  absl::MutexLock lock(&handlers_mu_);
  for (const ObjectPtr& object : cache_.List()) {
    if (handlers.on_add) handlers.on_add(object);
  }
  handlers_.push_back(std::move(handlers));
}

void Informer::Dispatch(const std::function<void(const InformerHandlers&)>& call) {
  absl::MutexLock lock(&handlers_mu_);
  for (const InformerHandlers& handlers : handlers_) call(handlers);
}

void Informer::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  if (options_.resync_period > absl::ZeroDuration()) {
    resync_thread_ = std::thread([this] { ResyncLoop(); });
  }
}

void Informer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (open_watch_ != nullptr) open_watch_->Cancel();
  }
  if (thread_.joinable()) thread_.join();
  if (resync_thread_.joinable()) resync_thread_.join();
}

bool Informer::WaitForSync(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  waiter_.AwaitFor(
      mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return synced_.load() || stopping_; },
      timeout);
  return synced_.load();
}

InformerStats Informer::Stats() const {
  absl::MutexLock lock(&mu_);
  InformerStats stats = stats_;
  stats.last_resource_version = resource_version_;
  return stats;
}

bool Informer::SleepUnlessStopped(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  waiter_.AwaitFor(
      mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; }, d);
  return !stopping_;
}

void Informer::Run() {
  Backoff backoff(options_.min_backoff, options_.max_backoff);
  bool need_list = true;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (need_list) {
      absl::Status listed = ListAndReplace();
      if (!listed.ok()) {
        absl::Duration wait = backoff.Next();
        logger_->Warning(name_, absl::StrCat("list failed, retrying in ",
                                             absl::FormatDuration(wait), ": ", listed.message()));
        if (!SleepUnlessStopped(wait)) return;
        continue;
      }
      need_list = false;
      backoff.Reset();
    }
    absl::Status watched = WatchOnce();
    if (watched.ok()) {
      backoff.Reset();  // the server ended the watch at its timeout: resume at once
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      ++stats_.watch_errors;
      if (KindOf(watched) == ApiErrorKind::kDecode) ++stats_.decode_errors;
      if (IsGone(watched)) ++stats_.relists_after_gone;
    }
    if (IsGone(watched)) {
      logger_->Info(name_,
                    absl::StrCat("resourceVersion expired, listing again: ", watched.message()));
      need_list = true;
      continue;
    }
    absl::Duration wait = backoff.Next();
    logger_->Warning(name_, absl::StrCat("watch failed, resuming in ", absl::FormatDuration(wait),
                                         ": ", watched.message()));
    if (!SleepUnlessStopped(wait)) return;
  }
}

absl::Status Informer::ListAndReplace() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  // Transformed page by page: a relist of thousands of objects never holds
  // them all untrimmed.
  absl::StatusOr<ObjectList> list = client_.ListAll(type_, options_.namespace_name, list_options,
                                                    options_.page_size, options_.transform);
  if (!list.ok()) return list.status();

  std::vector<ObjectPtr> fresh;
  fresh.reserve(list->items.size());
  for (Json& item : list->items) fresh.push_back(std::make_shared<const Json>(std::move(item)));
  // Old versions of the objects, to tell adds from updates.
  std::vector<std::pair<ObjectPtr, ObjectPtr>> changes;  // (old or null, new)
  changes.reserve(fresh.size());
  for (const ObjectPtr& object : fresh) {
    ObjectPtr old = cache_.Get(ObjectKey(*object));
    if (old && ResourceVersionOf(*old) == ResourceVersionOf(*object)) continue;
    changes.emplace_back(std::move(old), object);
  }
  std::vector<ObjectPtr> dropped = cache_.Replace(std::move(fresh));
  {
    absl::MutexLock lock(&mu_);
    ++stats_.lists;
    resource_version_ = list->resource_version;
  }
  for (const auto& change : changes) {
    const ObjectPtr& old = change.first;  // named, not bound: lambdas capture them
    const ObjectPtr& object = change.second;
    if (old) {
      Dispatch([&](const InformerHandlers& h) {
        if (h.on_update) h.on_update(old, object);
      });
    } else {
      Dispatch([&](const InformerHandlers& h) {
        if (h.on_add) h.on_add(object);
      });
    }
  }
  for (const ObjectPtr& object : dropped) {
    Dispatch([&](const InformerHandlers& h) {
      if (h.on_delete) h.on_delete(object);
    });
  }
  if (!synced_.exchange(true)) {
    { absl::MutexLock wake(&mu_); }  // WaitForSync() looks again on release.
    logger_->Info(name_, absl::StrCat("synced ", cache_.Size(), " objects at resourceVersion ",
                                      list->resource_version));
  }
  return absl::OkStatus();
}

absl::Status Informer::WatchOnce() {
  WatchOptions watch_options;
  watch_options.label_selector = options_.label_selector;
  watch_options.field_selector = options_.field_selector;
  watch_options.allow_bookmarks = true;
  if (options_.watch_timeout_seconds > 0) {
    watch_options.timeout_seconds = options_.watch_timeout_seconds;
  } else {
    absl::BitGen gen;
    watch_options.timeout_seconds = absl::Uniform<int>(gen, 300, 600);
  }
  {
    absl::MutexLock lock(&mu_);
    watch_options.resource_version = resource_version_;
  }
  absl::StatusOr<std::unique_ptr<WatchStream>> watch =
      client_.Watch(type_, options_.namespace_name, watch_options);
  if (!watch.ok()) return watch.status();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    open_watch_ = watch->get();
    ++stats_.watches;
  }
  absl::Status result;
  WatchEvent event;
  while (true) {
    absl::StatusOr<bool> next = (*watch)->Next(&event);
    if (!next.ok()) {
      result = next.status();
      break;
    }
    if (!*next) break;  // clean end at timeoutSeconds
    Apply(std::move(event));
  }
  absl::MutexLock lock(&mu_);
  open_watch_ = nullptr;
  return result;
}

void Informer::Apply(WatchEvent event) {
  std::string rv = ResourceVersionOf(event.object);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.events;
    if (!rv.empty()) resource_version_ = rv;
  }
  if (event.type == WatchEventType::kBookmark) return;
  if (logger_ != nullptr && logger_->Enabled(LogLevel::kDebug)) {
    logger_->Debug(name_, absl::StrCat(WatchEventTypeName(event.type), " ", ObjectKey(event.object),
                                       " at resourceVersion ", rv));
  }
  if (options_.transform) options_.transform(event.object);
  auto object = std::make_shared<const Json>(std::move(event.object));
  // Only after ObserveWrite can the cache hold a later version than a
  // MODIFIED event (events come in order); informers never written through
  // skip the check.
  if (event.type == WatchEventType::kModified && written_through_.load() &&
      cache_.HasNewerThan(*object)) {
    return;
  }
  if (event.type == WatchEventType::kDeleted) {
    ObjectPtr old = cache_.Remove(ObjectKey(*object));
    Dispatch([&](const InformerHandlers& h) {
      if (h.on_delete) h.on_delete(object);
    });
    return;
  }
  ObjectPtr old = cache_.Upsert(object);
  if (old) {
    Dispatch([&](const InformerHandlers& h) {
      if (h.on_update) h.on_update(old, object);
    });
  } else {
    Dispatch([&](const InformerHandlers& h) {
      if (h.on_add) h.on_add(object);
    });
  }
}

void Informer::ObserveWrite(Json object) {
  written_through_.store(true);
  if (options_.transform) options_.transform(object);
  cache_.ReplaceIfNewer(std::make_shared<const Json>(std::move(object)));
}

void Informer::ResyncLoop() {
  while (SleepUnlessStopped(options_.resync_period)) {
    if (!synced_.load()) continue;
    for (const ObjectPtr& object : cache_.List()) {
      Dispatch([&](const InformerHandlers& h) {
        if (h.on_update) h.on_update(object, object);
      });
    }
  }
}

}  // namespace kubetrain::kube
