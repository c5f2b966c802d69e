// Reads YAML or JSON text into nlohmann::json the way Kubernetes tooling does:
// plain YAML scalars are resolved with the YAML 1.2 core schema (null, bool,
// int, float, else string), quoted scalars stay strings, duplicate keys are
// refused. Errors name the source and the line and column (1-based).
// Stateless and thread-safe. No exceptions escape.
#ifndef KUBETRAIN_BASE_YAML_JSON_H_
#define KUBETRAIN_BASE_YAML_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace kubetrain::base {

// Parses exactly one YAML document (JSON is accepted too). `source_name`
// prefixes error messages, e.g. "job.yaml:3:7: malformed YAML: ...".
absl::StatusOr<nlohmann::json> ParseYamlOrJson(const std::string& text,
                                               const std::string& source_name);

}  // namespace kubetrain::base

#endif  // KUBETRAIN_BASE_YAML_JSON_H_
