#include "api/replica_type.h"

#include <cctype>

namespace kubetrain::api {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string ReplicaTypeName(ReplicaType type) {
  switch (type) {
    case ReplicaType::kPS:
      return "PS";
    case ReplicaType::kWorker:
      return "Worker";
    case ReplicaType::kChief:
      return "Chief";
    case ReplicaType::kEvaluator:
      return "Evaluator";
  }
  return "Unknown";
}

std::string ReplicaTypeLower(ReplicaType type) { return Lower(ReplicaTypeName(type)); }

std::optional<ReplicaType> ParseReplicaType(std::string_view name) {
  const std::string lower = Lower(name);
  for (ReplicaType t : kAllReplicaTypes) {
    if (ReplicaTypeLower(t) == lower) return t;
  }
  return std::nullopt;
}

}  // namespace kubetrain::api
