// KubeEmulator: an in-process Kubernetes API server for tests. It serves, on
// 127.0.0.1 over HTTP/1.1, core v1 pods (+/status), services, events, secrets,
// configmaps and namespaces ("default" exists from the start),
// coordination.k8s.io/v1 leases, kubetrain.io/v1alpha1 trainingjobs (+/status),
// scheduling.volcano.sh/v1beta1 podgroups (no /status, as Volcano's CRD) and
// nodes (+/status, and pods/binding for a node agent), with the paths,
// Status bodies, resourceVersion rules, watch stream framing, bookmarks, 410s,
// deletion propagation and garbage collection of a real kube-apiserver v1.20
// (see tests/operator/kube/testdata/kube-api-transcripts/ and the contract test
// that replays them). There is no kubelet or scheduler: tests set pod status
// through PUT/PATCH on /status. TrainingJob and PodGroup writes are checked
// against the schemas in their CRD manifests (KubeEmulatorOptions::crd_files).
// For kubectl it also serves discovery (/api, /apis, ...), a minimal OpenAPI v3
// (kube_emulator_discovery.h) and Tables for `kubectl get` with the CRDs'
// printer columns (kube_emulator_table.h).
//
// Thread-safe. The destructor ends open watches, stops the server and the
// garbage collector, and returns promptly.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "testing/kube_emulator_discovery.h"

namespace kubetrain::testing {

class EmulatorHttpServer;
class EmulatorStore;
struct ApiResult;
struct ResourceType;
class HttpConnection;
struct HttpRequest;

struct FaultRule {
  std::string method;           // "" = any; "GET", "POST", "PUT", "PATCH", "DELETE"
  std::string path_substring;   // "" = any; matched against the request path (no query)
  bool watch_only = false;      // only requests with watch=1/true
  int http_code = 500;          // 429, 500, 503 ...: answered with a proper Status body
  int count = 1;                // how many matching requests fail, then the rule is spent
  int retry_after_seconds = 0;  // >0: Retry-After header and details.retryAfterSeconds
};

struct KubeEmulatorOptions {
  int port = 0;             // 0: any free port on 127.0.0.1
  int watch_window = 1000;  // events kept for watch replay; older resourceVersion -> 410
  // BOOKMARKs (allowWatchBookmarks=true) this often, plus one 2 s before a
  // timeoutSeconds deadline, as the real server does.
  absl::Duration bookmark_interval = absl::Seconds(60);
  absl::Duration gc_delay = absl::Milliseconds(20);  // garbage collector latency
  // Non-empty: require "Authorization: Bearer <token>" (401 for a wrong token,
  // 403 for anonymous requests), as transcript 12.
  std::string token;
  // CustomResourceDefinition manifests whose openAPIV3Schema is applied to
  // writes of their resources (pruning, defaults, validation:
  // structural_schema.h), so a write a real server refuses with 422 is
  // refused here too. Empty: the project's, crds/kubetrain.io_trainingjobs.yaml
  // and tests/support/crds/scheduling.volcano.sh_podgroups.yaml.
  std::vector<std::string> crd_files;
};

class KubeEmulator {
 public:
  static absl::StatusOr<std::unique_ptr<KubeEmulator>> Start(
      const KubeEmulatorOptions& options = {});
  ~KubeEmulator();
  KubeEmulator(const KubeEmulator&) = delete;
  KubeEmulator& operator=(const KubeEmulator&) = delete;

  std::string Url() const;  // "http://127.0.0.1:<port>"
  // Abruptly closes every open watch connection (no clean end of stream).
  void DropWatches();
  void InjectFault(const FaultRule& rule);
  void ClearFaults();
  void SetResponseDelay(absl::Duration delay);  // before every response; 0 = none
  // Every resourceVersion up to now becomes "too old": watches from it get the
  // ERROR 410 event; exact lists (resourceVersionMatch=Exact, or with limit)
  // and continue tokens from before get HTTP 410.
  void Compact();
  int64_t ResourceVersion() const;  // the global counter
  int RequestCount(std::string_view method, std::string_view path_substring) const;
  int OpenWatches() const;

 private:
  KubeEmulator(const KubeEmulatorOptions& options, std::unique_ptr<EmulatorStore> store);
  void Handle(const HttpRequest& req, HttpConnection& conn);
  // `result` as a meta.k8s.io/v1 Table when the request's Accept asks for one.
  ApiResult AsTableIfAsked(const HttpRequest& req, const ResourceType& rt, ApiResult result) const;
  void ServeWatch(const HttpRequest& req, HttpConnection& conn, const void* resource,
                  const std::string& ns, const void* list_options);

  const KubeEmulatorOptions options_;
  Presentations presentations_;  // shortNames, printer columns (set by Start)
  std::unique_ptr<EmulatorStore> store_;
  std::unique_ptr<EmulatorHttpServer> server_;
  mutable absl::Mutex mu_;
  std::vector<FaultRule> faults_ ABSL_GUARDED_BY(mu_);
  absl::Duration delay_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<HttpConnection*> watches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_H_
