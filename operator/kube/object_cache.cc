#include "operator/kube/object_cache.h"

#include "absl/strings/str_cat.h"
#include "operator/kube/object.h"

namespace kubetrain::kube {

ObjectCache::ObjectCache() {
  absl::MutexLock lock(&mu_);
  index_funcs_[kIndexNamespace] = [](const nlohmann::json& obj) {
    std::string ns = Namespace(obj);
    return ns.empty() ? std::vector<std::string>{} : std::vector<std::string>{ns};
  };
  index_funcs_[kIndexOwnerUid] = [](const nlohmann::json& obj) {
    std::vector<std::string> out;
    const nlohmann::json* meta = obj.contains("metadata") ? &obj["metadata"] : nullptr;
    if (meta == nullptr || !meta->is_object() || !meta->contains("ownerReferences")) return out;
    const nlohmann::json& refs = (*meta)["ownerReferences"];
    if (!refs.is_array()) return out;
    for (const nlohmann::json& ref : refs) {
      if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string()) {
        out.push_back(ref["uid"].get<std::string>());
      }
    }
    return out;
  };
  index_funcs_[kIndexLabel] = [](const nlohmann::json& obj) {
    std::vector<std::string> out;
    for (const auto& [key, value] : Labels(obj)) out.push_back(absl::StrCat(key, "=", value));
    return out;
  };
}

void ObjectCache::AddIndex(const std::string& name, IndexFunc func) {
  absl::MutexLock lock(&mu_);
  index_funcs_[name] = std::move(func);
  auto& index = indexes_[name];
  index.clear();
  for (const auto& [key, object] : objects_) {
    for (const std::string& value : index_funcs_[name](*object)) index[value].insert(key);
  }
}

void ObjectCache::IndexLocked(const std::string& key, const nlohmann::json& object) {
  for (const auto& [name, func] : index_funcs_) {
    auto& index = indexes_[name];
    for (const std::string& value : func(object)) index[value].insert(key);
  }
}

void ObjectCache::UnindexLocked(const std::string& key, const nlohmann::json& object) {
  for (const auto& [name, func] : index_funcs_) {
    auto& index = indexes_[name];
    for (const std::string& value : func(object)) {
      auto it = index.find(value);
      if (it == index.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) index.erase(it);
    }
  }
}

ObjectPtr ObjectCache::Upsert(ObjectPtr object) {
  std::string key = ObjectKey(*object);
  absl::MutexLock lock(&mu_);
  ObjectPtr& slot = objects_[key];
  ObjectPtr old = std::move(slot);
  if (old) UnindexLocked(key, *old);
  IndexLocked(key, *object);
  slot = std::move(object);
  return old;
}

bool ObjectCache::ReplaceIfNewer(ObjectPtr object) {
  std::string key = ObjectKey(*object);
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return false;
  if (!NewerResourceVersion(ResourceVersionOf(*object), ResourceVersionOf(*it->second))) {
    return false;
  }
  UnindexLocked(key, *it->second);
  IndexLocked(key, *object);
  it->second = std::move(object);
  return true;
}

bool ObjectCache::HasNewerThan(const nlohmann::json& object) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(ObjectKey(object));
  return it != objects_.end() &&
         NewerResourceVersion(ResourceVersionOf(*it->second), ResourceVersionOf(object));
}

ObjectPtr ObjectCache::Remove(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  ObjectPtr old = std::move(it->second);
  objects_.erase(it);
  UnindexLocked(key, *old);
  return old;
}

std::vector<ObjectPtr> ObjectCache::Replace(std::vector<ObjectPtr> objects) {
  absl::flat_hash_map<std::string, ObjectPtr> fresh;
  fresh.reserve(objects.size());
  for (ObjectPtr& object : objects) {
    std::string key = ObjectKey(*object);
    fresh[key] = std::move(object);
  }
  std::vector<ObjectPtr> dropped;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, object] : objects_) {
    if (!fresh.contains(key)) dropped.push_back(object);
  }
  objects_ = std::move(fresh);
  for (auto& [name, index] : indexes_) index.clear();
  for (const auto& [key, object] : objects_) IndexLocked(key, *object);
  return dropped;
}

ObjectPtr ObjectCache::Get(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> ObjectCache::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(object);
  return out;
}

std::vector<std::string> ObjectCache::Keys() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(key);
  return out;
}

std::vector<ObjectPtr> ObjectCache::ByIndex(const std::string& index,
                                            const std::string& value) const {
  absl::MutexLock lock(&mu_);
  std::vector<ObjectPtr> out;
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return out;
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return out;
  out.reserve(keys->second.size());
  for (const std::string& key : keys->second) {
    auto it = objects_.find(key);
    if (it != objects_.end()) out.push_back(it->second);
  }
  return out;
}

size_t ObjectCache::Size() const {
  absl::MutexLock lock(&mu_);
  return objects_.size();
}

}  // namespace kubetrain::kube
