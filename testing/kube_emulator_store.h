// EmulatorStore: the object store behind the test Kubernetes API emulator.
// It holds objects as JSON, one global resourceVersion counter, the event log
// for watch replay, watchers, and a garbage-collector thread (owner references,
// Foreground/Orphan deletion, finalizers, namespace deletion). Request
// semantics (defaults, validation, conflicts, Status bodies) follow the
// kube-apiserver v1.20 transcripts in
// tests/operator/kube/testdata/kube-api-transcripts/.
//
// Thread-safe: every public method may be called from any thread.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_STORE_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_STORE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "testing/label_selector.h"
#include "testing/structural_schema.h"

namespace kubetrain::testing {

using OrderedJson = nlohmann::ordered_json;

// One served resource (group/version/plural).
struct ResourceType {
  std::string group;    // "" for core
  std::string version;  // "v1"
  std::string plural;   // "pods"
  std::string kind;     // "Pod"
  bool namespaced = true;
  bool custom = false;                 // custom resource: sorted keys, generation, 415 for SMP
  bool has_status = false;             // has a /status subresource
  bool rv_required = false;            // PUT without resourceVersion -> 422
  bool delete_returns_object = false;  // DELETE answers the object, not Status

  std::string ApiVersion() const;     // "v1", "kubetrain.io/v1alpha1"
  std::string GroupResource() const;  // "pods", "trainingjobs.kubetrain.io"
  std::string GroupKind() const;      // "Pod", "TrainingJob.kubetrain.io"
};

// The resources the emulator serves, in a fixed order.
const std::vector<ResourceType>& ServedResources();

// An API answer: status code, JSON body (already in wire key order), extra headers.
struct ApiResult {
  int code = 200;
  OrderedJson body;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct StatusCause {
  std::string reason;
  std::string message;
  std::string field;
};
struct StatusDetails {
  std::string name;
  std::string group;
  std::string kind;
  std::string uid;
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;
};
// A metav1.Status body exactly as kube-apiserver writes it. An empty reason is
// left out (the 500s of README #13); details are left out when null.
OrderedJson StatusBody(int code, const std::string& reason, const std::string& message,
                       const std::optional<StatusDetails>& details);
ApiResult StatusResult(int code, const std::string& reason, const std::string& message,
                       const std::optional<StatusDetails>& details);

// A parsed fieldSelector ("metadata.name=x,status.phase!=Running").
struct FieldRequirement {
  std::string field;
  bool equals = true;
  std::string value;
};

struct ListOptions {
  kube::LabelSelector labels;
  std::vector<FieldRequirement> fields;
  bool has_selector = false;  // label or field selector given (no remainingItemCount)
  int64_t limit = 0;
  std::string continue_token;
  std::string resource_version;        // as sent
  std::string resource_version_match;  // Exact / NotOlderThan / ""
};

struct WatchEvent {
  std::string type;  // ADDED MODIFIED DELETED BOOKMARK ERROR
  OrderedJson object;
};

struct DeleteOptions {
  std::string propagation;  // "" = default
  std::optional<int64_t> grace_period_seconds;
  std::string precondition_uid;
  std::string precondition_rv;
};

class EmulatorStore {
 public:
  struct Options {
    int watch_window = 1000;
    absl::Duration gc_delay = absl::Milliseconds(20);
    // The openAPIV3Schemas of custom resources: writes to a resource with one
    // are pruned, defaulted and validated as a real server does. A custom
    // resource without one keeps only apiVersion, kind, metadata, spec, status.
    std::vector<StructuralSchema> schemas;
  };
  // One open watch; its fields belong to the store (guarded by its mutex).
  class Watcher {
   public:
    const ResourceType* rt = nullptr;
    std::string ns;
    ListOptions options;
    int64_t min_rv = 0;  // events at or below are skipped (future resourceVersion)
    std::deque<WatchEvent> queue;
    bool closed = false;
    bool end_after_queue = false;  // too-old watch: deliver the ERROR, then end
  };

  explicit EmulatorStore(const Options& options);
  ~EmulatorStore();  // stops the GC thread and closes every watcher
  EmulatorStore(const EmulatorStore&) = delete;
  EmulatorStore& operator=(const EmulatorStore&) = delete;

  // `ns` is "" for cluster-scoped resources or all-namespace lists/watches.
  ApiResult Create(const ResourceType& rt, const std::string& ns, const std::string& body,
                   bool dry_run);
  ApiResult Get(const ResourceType& rt, const std::string& ns, const std::string& name);
  ApiResult List(const ResourceType& rt, const std::string& ns, const ListOptions& options);
  // `admitted`: admission ran already (a write through the scale
  // subresource, which is admitted as the Scale).
  ApiResult Update(const ResourceType& rt, const std::string& ns, const std::string& name,
                   const std::string& body, bool status_subresource, bool admitted = false);
  ApiResult Patch(const ResourceType& rt, const std::string& ns, const std::string& name,
                  const std::string& content_type, const std::string& body, bool status_subresource,
                  const std::string& field_manager);
  ApiResult Delete(const ResourceType& rt, const std::string& ns, const std::string& name,
                   const DeleteOptions& options);
  ApiResult DeleteCollection(const ResourceType& rt, const std::string& ns,
                             const ListOptions& options);

  // POST pods/<name>/binding: sets spec.nodeName to the Binding's
  // target.name once (409 when the pod is bound already, being deleted, or
  // its uid differs from the Binding's metadata.uid).
  ApiResult Bind(const std::string& ns, const std::string& name, const std::string& body);

  // What validating admission reads (kube_emulator_admission.h): the stored
  // ValidatingWebhookConfigurations and the labels of namespace `ns`.
  struct AdmissionInputs {
    nlohmann::json configurations;  // an array
    std::map<std::string, std::string> namespace_labels;
  };
  AdmissionInputs AdmissionInputsFor(const std::string& ns);

  // Starts a watch. On an HTTP-level error (bad resourceVersion) returns it in
  // `error` and nullptr. A too-old resourceVersion gives a watcher whose only
  // event is the ERROR 410.
  std::unique_ptr<Watcher> Watch(const ResourceType& rt, const std::string& ns,
                                 const ListOptions& options, ApiResult* error);
  // Waits until `watcher` has events, is closed, or `deadline`; moves pending
  // events into `out`. False when the watcher is closed (store shutting down).
  bool NextEvents(Watcher* watcher, absl::Time deadline, std::vector<WatchEvent>* out);
  // The BOOKMARK event for `rt` now (latest resourceVersion of that resource).
  WatchEvent Bookmark(const ResourceType& rt);
  void CloseWatcher(Watcher* watcher);
  int OpenWatchers() const;

  void Compact();
  int64_t ResourceVersion() const;

 private:
  struct Stored {
    nlohmann::json obj;
    std::set<std::string> owned;  // field paths last written by clients (managedFields stand-in)
  };
  struct LoggedEvent {
    int64_t rv = 0;
    const ResourceType* rt = nullptr;
    std::string type;
    nlohmann::json object;
    nlohmann::json old_object;  // previous state for MODIFIED
  };
  using Bucket = std::map<std::string, Stored>;  // key: "ns/name" or "name"

  Bucket& BucketLocked(const ResourceType& rt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NamespaceActiveLocked(const std::string& ns, ApiResult* error, const ResourceType& rt,
                             const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EmitLocked(const ResourceType& rt, const std::string& type, const nlohmann::json& obj,
                  const nlohmann::json& old_obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `obj` at `key` with a new resourceVersion; returns the stored object.
  nlohmann::json CommitLocked(const ResourceType& rt, const std::string& key, nlohmann::json obj,
                              std::set<std::string> owned, bool created)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const ResourceType& rt, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ApiResult UpdateLocked(const ResourceType& rt, const std::string& ns, const std::string& name,
                         nlohmann::json body, bool status_subresource, bool from_patch,
                         bool admitted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AdmissionInputs AdmissionInputsLocked(const std::string& ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stored configurations' webhooks on this write: a refusal, or nullopt.
  std::optional<ApiResult> AdmitLocked(const ResourceType& rt, const std::string& sub_resource,
                                       const std::string& operation, const std::string& ns,
                                       const std::string& name, const nlohmann::json& object,
                                       const nlohmann::json& old_object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ApiResult CreateLocked(const ResourceType& rt, const std::string& ns, nlohmann::json body,
                         bool dry_run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ApiResult DeleteLocked(const ResourceType& rt, const std::string& key,
                         const DeleteOptions& options) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the object if it is being deleted and has no finalizers left.
  bool MaybeFinishDeletionLocked(const ResourceType& rt, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool UidExistsLocked(const std::string& uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t LastRvLocked(const ResourceType& rt) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The schema loaded for `rt`, or null.
  const StructuralSchema* SchemaFor(const ResourceType& rt) const;
  void GcLoop();
  bool GcPassLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compacted_rv_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> last_rv_ ABSL_GUARDED_BY(mu_);  // per resource
  std::deque<LoggedEvent> log_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> sa_tokens_ ABSL_GUARDED_BY(mu_);  // ns -> token name
  int next_cluster_ip_ ABSL_GUARDED_BY(mu_) = 10;
  bool gc_dirty_ ABSL_GUARDED_BY(mu_) = false;
  // uids of objects added and not yet deleted, so a write that cannot give
  // the garbage collector work (no deletion, owners all present) does not
  // trigger a pass over every object.
  std::set<std::string> live_uids_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread gc_thread_;
};

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_STORE_H_
