// Informer: keeps an ObjectCache equal to the server's view of one resource
// (optionally one namespace and selector) with list + watch, and tells
// handlers what changed.
//
// The loop (client-go's Reflector): list every page, replace the cache, then
// watch from the list's resourceVersion with bookmarks. A watch that ends at
// its timeout resumes at once from the last version seen; a dropped
// connection, an injected 5xx or a malformed line resumes from there after a
// jittered backoff; an expired version (410 Gone, as an HTTP answer or an
// ERROR event) triggers a fresh list. A relist diffs against the cache, so
// handlers see adds, updates and deletes for whatever changed while the
// watch was down. Optional periodic resync re-delivers every object as an
// update (old == new) so level-triggered controllers re-check everything.
//
// Handlers run on the informer's thread, in event order; keep them short
// (enqueue a key). Thread-safe: Start/Stop from any thread, cache reads
// from any thread.
#ifndef KUBETRAIN_OPERATOR_KUBE_INFORMER_H_
#define KUBETRAIN_OPERATOR_KUBE_INFORMER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/kube/clock_waiter.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/object_cache.h"
#include "operator/kube/resource.h"

namespace kubetrain::kube {

// Drops metadata.managedFields and the last-applied-configuration
// annotation, which can double an object's size and no controller reads.
void StripServerBookkeeping(nlohmann::json& object);

struct InformerOptions {
  std::string namespace_name;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  absl::Duration resync_period = absl::ZeroDuration();  // 0: never
  int64_t page_size = 500;
  // 0: a random length in [300 s, 600 s) per watch, as client-go does.
  int watch_timeout_seconds = 0;
  // Applied to every object before it is cached (controller-runtime's
  // TransformFunc): drop what the controller never reads to save memory.
  std::function<void(nlohmann::json& object)> transform;
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(30);
};

struct InformerHandlers {
  std::function<void(const ObjectPtr& object)> on_add;
  std::function<void(const ObjectPtr& old_object, const ObjectPtr& new_object)> on_update;
  // The last state known; after a relist it may be older than the deletion.
  std::function<void(const ObjectPtr& last_known)> on_delete;
};

struct InformerStats {
  // Requests: LISTs (the first and every relist), WATCHes, and relists
  // forced by 410 Gone.
  int64_t lists = 0;
  int64_t watches = 0;
  int64_t relists_after_gone = 0;
  // Where the stream stands.
  std::string last_resource_version;
  // What came back: events delivered, failed watches, undecodable objects.
  int64_t events = 0;
  int64_t watch_errors = 0;
  int64_t decode_errors = 0;
};

class Informer {
 public:
  // Borrows `client`, `clock` (backoff, resync and WaitForSync time) and
  // `logger`, which must outlive this.
  Informer(KubeClient& client, const ResourceType& type, InformerOptions options,
           const Clock& clock, Logger* logger);
  ~Informer();  // Stop()
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Before Start: handlers then see every object as an add. After Start: the
  // cached objects are replayed to the new handlers as adds.
  void AddHandlers(InformerHandlers handlers);
  void Start();
  // Cancels the open watch and joins the threads; returns promptly.
  void Stop();

  bool HasSynced() const { return synced_.load(); }
  // Blocks until the first list is in the cache; false on timeout (on the
  // informer's clock) or Stop.
  bool WaitForSync(absl::Duration timeout) const;

  // Write-through: our own successful write, put in the cache at once so the
  // next reconcile does not work from the version before it (and conflict).
  // Only replaces an older cached version; handlers are not called (the
  // watch event that follows calls them). Thread-safe.
  void ObserveWrite(Json object);

  const ObjectCache& cache() const { return cache_; }
  ObjectCache& mutable_cache() { return cache_; }
  const ResourceType& type() const { return type_; }
  InformerStats Stats() const;

 private:
  void Run();
  void ResyncLoop();
  // Lists every page and diffs into the cache. False when stopping.
  absl::Status ListAndReplace();
  // Watches until the stream ends or fails. OK on a clean end.
  absl::Status WatchOnce();
  void Apply(WatchEvent event);  // takes the object: no copy into the cache
  // Sleeps up to `d` on the clock; false when Stop() was called.
  bool SleepUnlessStopped(absl::Duration d);
  void Dispatch(const std::function<void(const InformerHandlers&)>& call);

  KubeClient& client_;
  const ResourceType type_;
  const InformerOptions options_;
  Logger* const logger_;
  const std::string name_;
  ObjectCache cache_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> written_through_{false};  // ObserveWrite was called

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  WatchStream* open_watch_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string resource_version_ ABSL_GUARDED_BY(mu_);
  InformerStats stats_ ABSL_GUARDED_BY(mu_);
  mutable ClockWaiter waiter_;  // on mu_

  absl::Mutex handlers_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<InformerHandlers> handlers_ ABSL_GUARDED_BY(handlers_mu_);

  std::thread thread_;
  std::thread resync_thread_;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_INFORMER_H_
