// ObjectCache: the informer's thread-safe store of objects, keyed by
// "namespace/name", with indexes for the lookups controllers make:
//   kIndexNamespace  "ns"                 every object of a namespace
//   kIndexOwnerUid   "<uid>"              objects with an ownerReference to uid
//   kIndexLabel      "key=value"          objects carrying that label
// plus any index added with AddIndex before the first write.
//
// Objects are immutable once stored (shared_ptr<const Json>): readers get
// cheap snapshots and never see a half-written object.
// Thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_OBJECT_CACHE_H_
#define KUBETRAIN_OPERATOR_KUBE_OBJECT_CACHE_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::kube {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;

inline constexpr char kIndexNamespace[] = "namespace";
inline constexpr char kIndexOwnerUid[] = "owner-uid";
inline constexpr char kIndexLabel[] = "label";

class ObjectCache {
 public:
  // Index values of an object (may be several, or none).
  using IndexFunc = std::function<std::vector<std::string>(const nlohmann::json&)>;

  ObjectCache();
  ObjectCache(const ObjectCache&) = delete;
  ObjectCache& operator=(const ObjectCache&) = delete;

  void AddIndex(const std::string& name, IndexFunc func);

  // Inserts or replaces; returns the previous object (null if none).
  ObjectPtr Upsert(ObjectPtr object);
  // Replaces a cached object only with a newer resourceVersion of it (see
  // NewerResourceVersion); never inserts. True when replaced.
  bool ReplaceIfNewer(ObjectPtr object);
  // Whether the cached object under this object's key is newer than it.
  bool HasNewerThan(const nlohmann::json& object) const;
  // Removes by key; returns the removed object (null if absent).
  ObjectPtr Remove(const std::string& key);
  // Replaces the whole content (after a list). Returns the objects that were
  // dropped because the new content lacks them.
  std::vector<ObjectPtr> Replace(std::vector<ObjectPtr> objects);

  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  std::vector<std::string> Keys() const;
  std::vector<ObjectPtr> ByIndex(const std::string& index, const std::string& value) const;
  size_t Size() const;

 private:
  void IndexLocked(const std::string& key, const nlohmann::json& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnindexLocked(const std::string& key, const nlohmann::json& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ObjectPtr> objects_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, IndexFunc> index_funcs_ ABSL_GUARDED_BY(mu_);
  // index name -> value -> keys
  absl::flat_hash_map<std::string,
                      absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>>
      indexes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_OBJECT_CACHE_H_
