// JobStatus <-> JSON (job_status.h states the JSON's shape), read with the
// decoder's field toolkit (json_fields.h).
#include "api/job_status.h"

#include "absl/strings/str_cat.h"
#include "api/json_fields.h"

namespace kubetrain::api {
namespace {

using nlohmann::json;
using namespace json_fields;  // NOLINT(build/namespaces): the decoder's toolkit

// An absent or null field leaves `out` as it is.
absl::Status GetNumber(const json& obj, const std::string& key, const std::string& path,
                       std::optional<double>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) {
    return FieldError(Join(path, key), absl::StrCat("must be a number, got ", Describe(*it)));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

template <typename Int>
absl::Status GetInt(const json& obj, const std::string& key, const std::string& path, Int* out) {
  std::optional<Int> v;
  if (absl::Status s = GetOptionalInt(obj, key, path, &v); !s.ok()) return s;
  if (v) *out = *v;
  return absl::OkStatus();
}

absl::StatusOr<Condition> ConditionFromJson(const json& v, const std::string& path) {
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  Condition c;
  if (absl::Status s = GetString(v, "type", path, &c.type); !s.ok()) return s;
  std::optional<ConditionStatus> status;
  if (absl::Status s = GetEnum<ConditionStatus>(v, "status", path, &ParseConditionStatus,
                                                "True, False, Unknown", &status);
      !s.ok()) {
    return s;
  }
  if (status) c.status = *status;
  if (absl::Status s = GetString(v, "reason", path, &c.reason); !s.ok()) return s;
  if (absl::Status s = GetString(v, "message", path, &c.message); !s.ok()) return s;
  if (absl::Status s = GetString(v, "lastUpdateTime", path, &c.last_update_time); !s.ok()) {
    return s;
  }
  if (absl::Status s = GetString(v, "lastTransitionTime", path, &c.last_transition_time); !s.ok()) {
    return s;
  }
  return c;
}

absl::StatusOr<ReplicaStatus> ReplicaStatusFromJson(const json& v, const std::string& path) {
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  ReplicaStatus rs;
  for (auto [key, field] : {std::pair{"active", &rs.active}, std::pair{"ready", &rs.ready},
                            std::pair{"succeeded", &rs.succeeded}, std::pair{"failed", &rs.failed},
                            std::pair{"restarts", &rs.restarts}}) {
    if (absl::Status s = GetInt(v, key, path, field); !s.ok()) return s;
  }
  if (auto it = v.find("completedIndexes"); it != v.end() && !it->is_null()) {
    const std::string p = Join(path, "completedIndexes");
    if (!it->is_array()) return FieldError(p, absl::StrCat("must be a list, got ", Describe(*it)));
    for (size_t i = 0; i < it->size(); ++i) {
      int32_t index = 0;
      if (absl::Status s = IntValue((*it)[i], absl::StrCat(p, "[", i, "]"), &index); !s.ok()) {
        return s;
      }
      rs.completed_indexes.insert(index);
    }
  }
  if (absl::Status s = GetString(v, "selector", path, &rs.selector); !s.ok()) return s;
  return rs;
}

absl::StatusOr<LastFailure> LastFailureFromJson(const json& v, const std::string& path) {
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  LastFailure f;
  std::optional<ReplicaType> type;
  if (absl::Status s = GetEnum<ReplicaType>(v, "replicaType", path, &ParseReplicaType,
                                            "PS, Worker, Chief, Evaluator", &type);
      !s.ok()) {
    return s;
  }
  if (type) f.replica_type = *type;
  if (absl::Status s = GetInt(v, "replicaIndex", path, &f.replica_index); !s.ok()) return s;
  if (absl::Status s = GetString(v, "pod", path, &f.pod); !s.ok()) return s;
  if (absl::Status s = GetString(v, "podUID", path, &f.pod_uid); !s.ok()) return s;
  if (absl::Status s = GetString(v, "node", path, &f.node); !s.ok()) return s;
  if (absl::Status s = GetOptionalInt(v, "exitCode", path, &f.exit_code); !s.ok()) return s;
  if (absl::Status s = GetString(v, "reason", path, &f.reason); !s.ok()) return s;
  if (absl::Status s = GetString(v, "message", path, &f.message); !s.ok()) return s;
  if (absl::Status s = GetString(v, "time", path, &f.time); !s.ok()) return s;
  return f;
}

absl::StatusOr<LastCheckpoint> LastCheckpointFromJson(const json& v, const std::string& path) {
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  LastCheckpoint c;
  if (absl::Status s = GetInt(v, "step", path, &c.step); !s.ok()) return s;
  if (absl::Status s = GetString(v, "replica", path, &c.replica); !s.ok()) return s;
  if (absl::Status s = GetString(v, "path", path, &c.path); !s.ok()) return s;
  if (absl::Status s = GetString(v, "time", path, &c.time); !s.ok()) return s;
  return c;
}

absl::StatusOr<Progress> ProgressFromJson(const json& v, const std::string& path) {
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  Progress p;
  if (absl::Status s = GetOptionalInt(v, "step", path, &p.step); !s.ok()) return s;
  if (absl::Status s = GetOptionalInt(v, "totalSteps", path, &p.total_steps); !s.ok()) return s;
  if (absl::Status s = GetNumber(v, "loss", path, &p.loss); !s.ok()) return s;
  if (absl::Status s = GetNumber(v, "accuracy", path, &p.accuracy); !s.ok()) return s;
  if (absl::Status s = GetNumber(v, "samplesPerSecond", path, &p.samples_per_second); !s.ok()) {
    return s;
  }
  if (absl::Status s = GetString(v, "updatedAt", path, &p.updated_at); !s.ok()) return s;
  return p;
}

json ConditionToJson(const Condition& c) {
  json condition{{"type", c.type},
                 {"status", ConditionStatusName(c.status)},
                 {"reason", c.reason},
                 {"message", c.message},
                 {"lastUpdateTime", c.last_update_time},
                 {"lastTransitionTime", c.last_transition_time}};
  return condition;
}

json ReplicaStatusToJson(const ReplicaStatus& rs) {
  json replica{{"active", rs.active}, {"ready", rs.ready},       {"succeeded", rs.succeeded},
               {"failed", rs.failed}, {"restarts", rs.restarts}, {"selector", rs.selector}};
  if (!rs.completed_indexes.empty()) replica["completedIndexes"] = rs.completed_indexes;
  return replica;
}

json LastFailureToJson(const LastFailure& f) {
  json failure{{"replicaType", ReplicaTypeName(f.replica_type)},
               {"replicaIndex", f.replica_index},
               {"pod", f.pod},
               {"node", f.node},
               {"reason", f.reason},
               {"message", f.message},
               {"time", f.time}};
  if (!f.pod_uid.empty()) failure["podUID"] = f.pod_uid;
  if (f.exit_code) failure["exitCode"] = *f.exit_code;
  return failure;
}

json LastCheckpointToJson(const LastCheckpoint& c) {
  json checkpoint{{"step", c.step}, {"replica", c.replica}, {"path", c.path}, {"time", c.time}};
  return checkpoint;
}

}  // namespace

std::string ConditionStatusName(ConditionStatus status) {
  switch (status) {
    case ConditionStatus::kTrue:
      return "True";
    case ConditionStatus::kFalse:
      return "False";
    case ConditionStatus::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

std::optional<ConditionStatus> ParseConditionStatus(std::string_view name) {
  for (ConditionStatus s :
       {ConditionStatus::kTrue, ConditionStatus::kFalse, ConditionStatus::kUnknown}) {
    if (ConditionStatusName(s) == name) return s;
  }
  return std::nullopt;
}

const Condition* FindCondition(const JobStatus& status, std::string_view type) {
  for (const Condition& c : status.conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool IsConditionTrue(const JobStatus& status, std::string_view type) {
  const Condition* c = FindCondition(status, type);
  return c != nullptr && c->status == ConditionStatus::kTrue;
}

std::string Phase(const JobStatus& status) {
  for (auto it = status.conditions.rbegin(); it != status.conditions.rend(); ++it) {
    if (it->status == ConditionStatus::kTrue) return it->type;
  }
  return "";
}

absl::StatusOr<JobStatus> StatusFromJson(const json& v) {
  JobStatus status;
  if (v.is_null()) return status;
  const std::string path = "status";
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  if (auto it = v.find("conditions"); it != v.end() && !it->is_null()) {
    const std::string p = Join(path, "conditions");
    if (!it->is_array()) return FieldError(p, absl::StrCat("must be a list, got ", Describe(*it)));
    for (size_t i = 0; i < it->size(); ++i) {
      absl::StatusOr<Condition> c = ConditionFromJson((*it)[i], absl::StrCat(p, "[", i, "]"));
      if (!c.ok()) return c.status();
      status.conditions.push_back(*std::move(c));
    }
  }
  if (auto it = v.find("replicaStatuses"); it != v.end() && !it->is_null()) {
    const std::string p = Join(path, "replicaStatuses");
    if (absl::Status s = CheckObject(*it, p); !s.ok()) return s;
    for (const auto& [key, value] : it->items()) {
      std::optional<ReplicaType> type = ParseReplicaType(key);
      if (!type) {
        return FieldError(Join(p, key), "unknown replica type (PS, Worker, Chief, Evaluator)");
      }
      absl::StatusOr<ReplicaStatus> rs = ReplicaStatusFromJson(value, Join(p, key));
      if (!rs.ok()) return rs.status();
      status.replica_statuses[*type] = *std::move(rs);
    }
  }
  if (absl::Status s = GetOptionalInt(v, "restartCount", path, &status.restart_count); !s.ok()) {
    return s;
  }
  if (absl::Status s = GetOptionalInt(v, "disruptionCount", path, &status.disruption_count);
      !s.ok()) {
    return s;
  }
  if (auto it = v.find("lastFailure"); it != v.end() && !it->is_null()) {
    absl::StatusOr<LastFailure> f = LastFailureFromJson(*it, Join(path, "lastFailure"));
    if (!f.ok()) return f.status();
    status.last_failure = *std::move(f);
  }
  if (auto it = v.find("lastCheckpoint"); it != v.end() && !it->is_null()) {
    absl::StatusOr<LastCheckpoint> c = LastCheckpointFromJson(*it, Join(path, "lastCheckpoint"));
    if (!c.ok()) return c.status();
    status.last_checkpoint = *std::move(c);
  }
  if (absl::Status s = GetString(v, "startTime", path, &status.start_time); !s.ok()) return s;
  if (absl::Status s = GetString(v, "completionTime", path, &status.completion_time); !s.ok()) {
    return s;
  }
  if (absl::Status s = GetString(v, "lastReconcileTime", path, &status.last_reconcile_time);
      !s.ok()) {
    return s;
  }
  if (auto it = v.find("progress"); it != v.end() && !it->is_null()) {
    absl::StatusOr<Progress> p = ProgressFromJson(*it, Join(path, "progress"));
    if (!p.ok()) return p.status();
    status.progress = *std::move(p);
  }
  if (absl::Status s = GetOptionalInt(v, "worldSize", path, &status.world_size); !s.ok()) return s;
  if (absl::Status s = GetOptionalInt(v, "generation", path, &status.generation); !s.ok()) {
    return s;
  }
  return status;
}

json ProgressToJson(const Progress& p) {
  json progress = json::object();
  if (p.step) progress["step"] = *p.step;
  if (p.total_steps) progress["totalSteps"] = *p.total_steps;
  if (p.loss) progress["loss"] = *p.loss;
  if (p.accuracy) progress["accuracy"] = *p.accuracy;
  if (p.samples_per_second) progress["samplesPerSecond"] = *p.samples_per_second;
  if (!p.updated_at.empty()) progress["updatedAt"] = p.updated_at;
  return progress;
}

json StatusToJson(const JobStatus& status) {
  json out = json::object();
  if (!status.conditions.empty()) {
    json conditions = json::array();
    for (const Condition& c : status.conditions) conditions.push_back(ConditionToJson(c));
    out["conditions"] = std::move(conditions);
  }
  if (!status.replica_statuses.empty()) {
    json replicas = json::object();
    for (const auto& [type, rs] : status.replica_statuses) {
      replicas[ReplicaTypeName(type)] = ReplicaStatusToJson(rs);
    }
    out["replicaStatuses"] = std::move(replicas);
  }
  if (status.restart_count) out["restartCount"] = *status.restart_count;
  if (status.disruption_count) out["disruptionCount"] = *status.disruption_count;
  if (status.last_failure) out["lastFailure"] = LastFailureToJson(*status.last_failure);
  if (status.last_checkpoint) {
    out["lastCheckpoint"] = LastCheckpointToJson(*status.last_checkpoint);
  }
  if (!status.start_time.empty()) out["startTime"] = status.start_time;
  if (!status.completion_time.empty()) out["completionTime"] = status.completion_time;
  if (!status.last_reconcile_time.empty()) out["lastReconcileTime"] = status.last_reconcile_time;
  if (status.progress) out["progress"] = ProgressToJson(*status.progress);
  if (status.world_size) out["worldSize"] = *status.world_size;
  if (status.generation) out["generation"] = *status.generation;
  return out;
}

}  // namespace kubetrain::api
