// Test helpers for metrics: an HTTP GET on loopback, reading series out of
// Prometheus text, and `promtool check metrics`. Thread-safe (no shared
// state).
#ifndef KUBETRAIN_TESTS_SUPPORT_METRICS_TEST_UTIL_H_
#define KUBETRAIN_TESTS_SUPPORT_METRICS_TEST_UTIL_H_

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace kubetrain::metrics::testing_util {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// `method` http://127.0.0.1:<port><path>, HTTP/1.0 (so no chunked body),
// read to the end.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(5),
                                     const std::string& method = "GET");

// Like HttpGet, but no answer (refused, timeout, garbage) is status 0 with
// an empty body: for probes and loops that only look at the code.
HttpResponse HttpTry(int port, const std::string& path, const std::string& method = "GET",
                     std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Every sample line of Prometheus text as "name{labels}" -> value, labels
// exactly as written.
std::multimap<std::string, double> ParseSamples(const std::string& text);

// The sum of every sample named `name` whose labels contain all of
// `label_matchers` (each `key="value"`); nullopt when there is none.
std::optional<double> SumSeries(const std::string& text, const std::string& name,
                                const std::set<std::string>& label_matchers = {});

// Metric names of every sample line (histograms give _bucket/_sum/_count).
std::set<std::string> SampleNames(const std::string& text);

// Whether promtool is on the PATH.
bool HavePromtool();

// Runs `promtool check metrics` on `text`; returns what it printed
// (stdout and stderr) and its exit code.
struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};
PromtoolResult PromtoolCheckMetrics(const std::string& text);

}  // namespace kubetrain::metrics::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_METRICS_TEST_UTIL_H_
