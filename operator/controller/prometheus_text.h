// A parser of the Prometheus text exposition format (version 0.0.4), enough
// for the operator to read a replica's /metrics page: `# HELP` and `# TYPE`
// lines, other comments, samples with labels (escapes \\ \" \n in values),
// float values including NaN, +Inf and -Inf, and optional millisecond
// timestamps.
//
//   # HELP kubetrain_global_step Step this replica has reached.
//   # TYPE kubetrain_global_step gauge
//   kubetrain_global_step{job="fmnist",replica_type="worker"} 1200 1700000000000
//
// A malformed line is an InvalidArgument error naming its 1-based line
// number. Stateless functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_PROMETHEUS_TEXT_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kubetrain::controller {

struct PrometheusSample {
  std::string name;  // with any _bucket/_sum/_count suffix, as written
  std::map<std::string, std::string> labels;
  double value = 0;
  std::optional<int64_t> timestamp_ms;
};

struct PrometheusExposition {
  std::vector<PrometheusSample> samples;     // in the order of the text
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram|summary|untyped
  std::map<std::string, std::string> help;   // family -> docstring (unescaped)
};

// Parses a whole page. Lines may end in "\n" or "\r\n"; blank lines are
// skipped. A second HELP or TYPE line for one family is an error, as in
// Prometheus' own parser.
absl::StatusOr<PrometheusExposition> ParsePrometheusText(absl::string_view text);

// Whether `sample` belongs to a replica: each of these labels it carries
// equals the expected value (an expected "" accepts anything).
bool SampleMatches(const PrometheusSample& sample,
                   const std::vector<std::pair<std::string, std::string>>& expected);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_PROMETHEUS_TEXT_H_
