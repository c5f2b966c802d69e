#include "testing/kube_emulator.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/yaml_json.h"
#include "testing/kube_emulator_http.h"
#include "testing/kube_emulator_pod_proxy.h"
#include "testing/kube_emulator_scale.h"
#include "testing/kube_emulator_store.h"
#include "testing/kube_emulator_table.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

const char* ReasonPhrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

// Go's encoding/json escapes <, > and & inside strings; so do we, byte for byte.
std::string GoJson(const OrderedJson& v, bool pretty) {
  std::string s = pretty ? v.dump(2) : v.dump();
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out.push_back(c);
    }
  }
  if (!pretty) out.push_back('\n');
  return out;
}

bool WantsPretty(const HttpRequest& req) {
  std::string ua = req.Header("user-agent");
  auto it = req.query.find("pretty");
  return absl::StartsWith(ua, "curl") || absl::StartsWith(ua, "Wget") ||
         (it != req.query.end() && (it->second == "true" || it->second == "1"));
}

void WriteResponse(HttpConnection& conn, int code, const std::string& content_type,
                   const std::string& body,
                   const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string head =
      absl::StrCat("HTTP/1.1 ", code, " ", ReasonPhrase(code),
                   "\r\nCache-Control: no-cache, private\r\nContent-Type: ", content_type, "\r\n");
  for (const auto& [k, v] : headers) absl::StrAppend(&head, k, ": ", v, "\r\n");
  absl::StrAppend(&head, "Content-Length: ", body.size(), "\r\n\r\n");
  conn.Write(absl::StrCat(head, body));
}

void WriteApi(HttpConnection& conn, const HttpRequest& req, const ApiResult& r) {
  WriteResponse(conn, r.code, "application/json", GoJson(r.body, WantsPretty(req)), r.headers);
}

void WriteText404(HttpConnection& conn) {
  WriteResponse(conn, 404, "text/plain; charset=utf-8", "404 page not found\n",
                {{"X-Content-Type-Options", "nosniff"}});
}

const ResourceType* FindResource(const std::string& group, const std::string& version,
                                 const std::string& plural) {
  for (const ResourceType& rt : ServedResources()) {
    if (rt.group == group && rt.version == version && rt.plural == plural) return &rt;
  }
  return nullptr;
}

bool KnownGroupVersion(const std::string& group, const std::string& version) {
  for (const ResourceType& rt : ServedResources()) {
    if (rt.group == group && rt.version == version) return true;
  }
  return false;
}

bool TrueParam(const HttpRequest& req, const char* name) {
  auto it = req.query.find(name);
  return it != req.query.end() && (it->second == "1" || it->second == "true");
}

std::string Param(const HttpRequest& req, const char* name) {
  auto it = req.query.find(name);
  return it == req.query.end() ? "" : it->second;
}

// Parses list/watch query parameters; false with `error` set on bad input.
bool ParseListOptions(const HttpRequest& req, ListOptions* o, ApiResult* error) {
  std::string labels = Param(req, "labelSelector");
  absl::StatusOr<kube::LabelSelector> sel = kube::LabelSelector::Parse(labels);
  if (!sel.ok()) {
    *error = StatusResult(400, "BadRequest", std::string(sel.status().message()), std::nullopt);
    return false;
  }
  o->labels = *sel;
  std::string fields = Param(req, "fieldSelector");
  for (absl::string_view part : absl::StrSplit(fields, ',', absl::SkipWhitespace())) {
    std::string p(absl::StripAsciiWhitespace(part));
    FieldRequirement f;
    size_t pos;
    if ((pos = p.find("!=")) != std::string::npos) {
      f.field = p.substr(0, pos);
      f.equals = false;
      f.value = p.substr(pos + 2);
    } else if ((pos = p.find("==")) != std::string::npos) {
      f.field = p.substr(0, pos);
      f.value = p.substr(pos + 2);
    } else if ((pos = p.find('=')) != std::string::npos) {
      f.field = p.substr(0, pos);
      f.value = p.substr(pos + 1);
    } else {
      *error =
          StatusResult(400, "BadRequest",
                       absl::StrCat("invalid selector: '", fields, "'; can't understand '", p, "'"),
                       std::nullopt);
      return false;
    }
    o->fields.push_back(f);
  }
  o->has_selector = !o->labels.Empty() || !o->fields.empty();
  std::string limit = Param(req, "limit");
  if (!limit.empty() && !absl::SimpleAtoi(limit, &o->limit)) o->limit = 0;
  o->continue_token = Param(req, "continue");
  o->resource_version = Param(req, "resourceVersion");
  o->resource_version_match = Param(req, "resourceVersionMatch");
  return true;
}

}  // namespace

ApiResult KubeEmulator::AsTableIfAsked(const HttpRequest& req, const ResourceType& rt,
                                       ApiResult result) const {
  if (result.code != 200 || !WantsTable(req.Header("accept"))) return result;
  auto p = presentations_.find(rt.GroupResource());
  static const std::vector<PrinterColumn> kNone;
  result.body =
      ToTable(rt, result.body, p == presentations_.end() ? kNone : p->second.columns, absl::Now());
  return result;
}

namespace {

std::string Verb(const std::string& method, bool has_name, bool watch) {
  if (method == "GET") return watch ? "watch" : has_name ? "get" : "list";
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return has_name ? "delete" : "deletecollection";
  return absl::AsciiStrToLower(method);
}

ApiResult FaultResult(const FaultRule& rule) {
  std::string reason = "InternalError";
  std::string message = "Internal error occurred: injected fault";
  switch (rule.http_code) {
    case 429:
      reason = "TooManyRequests";
      message = "Too many requests, please try again later.";
      break;
    case 503:
      reason = "ServiceUnavailable";
      message = "The server is currently unable to handle the request";
      break;
    case 504:
      reason = "Timeout";
      message = "The server was unable to return a response in the time allotted";
      break;
    case 409:
      reason = "Conflict";
      message = "injected conflict";
      break;
    case 404:
      reason = "NotFound";
      message = "the server could not find the requested resource";
      break;
    default:
      break;
  }
  std::optional<StatusDetails> details;
  if (rule.retry_after_seconds > 0) {
    StatusDetails d;
    d.retry_after_seconds = rule.retry_after_seconds;
    details = d;
  }
  return StatusResult(rule.http_code, reason, message, details);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KubeEmulator>> KubeEmulator::Start(
    const KubeEmulatorOptions& options) {
  EmulatorStore::Options store_options;
  store_options.watch_window = options.watch_window;
  store_options.gc_delay = options.gc_delay;
  std::vector<std::string> crd_files = options.crd_files;
  if (crd_files.empty()) crd_files = absl::StrSplit(KUBETRAIN_EMULATOR_CRD_FILES, ',');
  Presentations presentations;
  for (const std::string& path : crd_files) {
    absl::StatusOr<StructuralSchema> schema = StructuralSchema::FromCrdFile(path);
    if (!schema.ok()) return schema.status();
    store_options.schemas.push_back(*std::move(schema));
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<json> crd = base::ParseYamlOrJson(text.str(), path);
    if (!crd.ok()) return crd.status();
    absl::StatusOr<std::pair<std::string, ResourcePresentation>> p =
        ResourcePresentation::FromCrd(*crd);
    if (!p.ok()) {
      return absl::Status(p.status().code(), absl::StrCat(path, ": ", p.status().message()));
    }
    presentations.insert(*std::move(p));
  }
  std::unique_ptr<KubeEmulator> emu(
      new KubeEmulator(options, std::make_unique<EmulatorStore>(store_options)));
  emu->presentations_ = WithBuiltinPresentations(std::move(presentations));
  absl::StatusOr<std::unique_ptr<EmulatorHttpServer>> server = EmulatorHttpServer::Start(
      options.port,
      [e = emu.get()](const HttpRequest& req, HttpConnection& conn) { e->Handle(req, conn); });
  if (!server.ok()) return server.status();
  emu->server_ = *std::move(server);
  return emu;
}

KubeEmulator::KubeEmulator(const KubeEmulatorOptions& options, std::unique_ptr<EmulatorStore> store)
    : options_(options), store_(std::move(store)), delay_(absl::ZeroDuration()) {}

KubeEmulator::~KubeEmulator() {
  if (server_ != nullptr) server_->Stop();
  server_.reset();
  store_.reset();
}

std::string KubeEmulator::Url() const { return absl::StrCat("http://127.0.0.1:", server_->port()); }

void KubeEmulator::DropWatches() {
  absl::MutexLock lock(&mu_);
  for (HttpConnection* c : watches_) c->Abort();
}

void KubeEmulator::InjectFault(const FaultRule& rule) {
  absl::MutexLock lock(&mu_);
  faults_.push_back(rule);
}

void KubeEmulator::ClearFaults() {
  absl::MutexLock lock(&mu_);
  faults_.clear();
}

void KubeEmulator::SetResponseDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}

void KubeEmulator::Compact() { store_->Compact(); }

int64_t KubeEmulator::ResourceVersion() const { return store_->ResourceVersion(); }

int KubeEmulator::RequestCount(std::string_view method, std::string_view path_substring) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [m, p] : requests_) {
    if ((method.empty() || m == method) &&
        p.find(std::string(path_substring)) != std::string::npos) {
      ++n;
    }
  }
  return n;
}

int KubeEmulator::OpenWatches() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watches_.size());
}

void KubeEmulator::Handle(const HttpRequest& req, HttpConnection& conn) {
  bool watch = TrueParam(req, "watch");
  absl::Duration delay;
  std::optional<FaultRule> fault;
  {
    absl::MutexLock lock(&mu_);
    requests_.emplace_back(req.method, req.path);
    delay = delay_;
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (!it->method.empty() && it->method != req.method) continue;
      if (!it->path_substring.empty() && req.path.find(it->path_substring) == std::string::npos) {
        continue;
      }
      if (it->watch_only && !watch) continue;
      fault = *it;
      if (--it->count <= 0) faults_.erase(it);
      break;
    }
  }
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);

  // Authentication (transcript 12): a wrong token is 401 everywhere; no token is anonymous.
  bool anonymous = false;
  if (!options_.token.empty()) {
    std::string auth = req.Header("authorization");
    std::vector<std::string> parts = absl::StrSplit(auth, ' ', absl::SkipEmpty());
    if (parts.size() == 2 && absl::AsciiStrToLower(parts[0]) == "bearer") {
      if (parts[1] != options_.token) {
        WriteApi(conn, req, StatusResult(401, "Unauthorized", "Unauthorized", std::nullopt));
        return;
      }
    } else {
      anonymous = true;
    }
  }
  if (req.path == "/healthz" || req.path == "/readyz" || req.path == "/livez") {
    WriteResponse(conn, 200, "text/plain; charset=utf-8", "ok",
                  {{"X-Content-Type-Options", "nosniff"}});
    return;
  }
  if (req.path == "/version") {
    OrderedJson v = {{"major", "1"},
                     {"minor", "20"},
                     {"gitVersion", "v1.20.2"},
                     {"gitCommit", "emulator"},
                     {"gitTreeState", "clean"},
                     {"buildDate", ""},
                     {"goVersion", "emulated"},
                     {"compiler", "gc"},
                     {"platform", "linux/amd64"}};
    WriteResponse(conn, 200, "application/json", v.dump(2), {});
    return;
  }
  if (fault.has_value()) {
    WriteApi(conn, req, FaultResult(*fault));
    return;
  }
  if (req.method == "GET" && !anonymous) {
    std::optional<OrderedJson> doc =
        DiscoveryDocument(req.path, presentations_, absl::StrCat("127.0.0.1:", server_->port()));
    if (doc.has_value()) {
      WriteResponse(conn, 200, "application/json", GoJson(*doc, WantsPretty(req)), {});
      return;
    }
  }

  // Route: /api/v1/... or /apis/<group>/<version>/...
  std::vector<std::string> segs = absl::StrSplit(req.path, '/', absl::SkipEmpty());
  std::string group, version;
  size_t i = 0;
  if (!segs.empty() && segs[0] == "api" && segs.size() >= 2) {
    version = segs[1];
    i = 2;
  } else if (!segs.empty() && segs[0] == "apis" && segs.size() >= 3) {
    group = segs[1];
    version = segs[2];
    i = 3;
  } else {
    if (anonymous) {
      WriteApi(conn, req,
               StatusResult(403, "Forbidden",
                            absl::StrCat("forbidden: User \"system:anonymous\" cannot get path \"",
                                         req.path, "\""),
                            StatusDetails{}));
      return;
    }
    WriteText404(conn);
    return;
  }
  if (!KnownGroupVersion(group, version)) {
    WriteText404(conn);
    return;
  }
  std::vector<std::string> rest(segs.begin() + static_cast<long>(i), segs.end());
  std::string ns, plural, name, sub;
  if (!rest.empty() && rest[0] == "namespaces" &&
      (rest.size() >= 4 || (rest.size() == 3 && rest[2] != "status" && rest[2] != "finalize"))) {
    ns = rest[1];
    plural = rest[2];
    if (rest.size() >= 4) name = rest[3];
    if (rest.size() >= 5) sub = rest[4];
    if (rest.size() > 5) plural.clear();
  } else if (!rest.empty()) {
    plural = rest[0];
    if (rest.size() >= 2) name = rest[1];
    if (rest.size() >= 3) sub = rest[2];
    if (rest.size() > 3) plural.clear();
  }
  // pods/log and pods/proxy: forwarded to the node's kubelet and to the pod
  // (kube_emulator_pod_proxy.h).
  if (group.empty() && rest.size() >= 5 && rest[0] == "namespaces" && rest[2] == "pods" &&
      (rest[4] == "log" || rest[4] == "proxy") && !anonymous) {
    if (req.method != "GET") {
      WriteApi(conn, req,
               StatusResult(405, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource",
                            StatusDetails{}));
      return;
    }
    const bool log = rest[4] == "log";
    if (log && rest.size() != 5) {
      WriteApi(conn, req,
               StatusResult(404, "NotFound", "the server could not find the requested resource",
                            StatusDetails{}));
      return;
    }
    std::vector<std::string> name_parts = absl::StrSplit(rest[3], ':');
    const std::string pod_name = name_parts.size() == 3 ? name_parts[1] : name_parts[0];
    ApiResult pod = store_->Get(*FindResource("", "v1", "pods"), rest[1], pod_name);
    if (pod.code != 200) {
      WriteApi(conn, req, pod);
      return;
    }
    std::optional<ApiResult> error;
    if (log) {
      const std::string node_name =
          pod.body.contains("spec") && pod.body["spec"].contains("nodeName")
              ? pod.body["spec"]["nodeName"].get<std::string>()
              : "";
      ApiResult node;
      if (!node_name.empty()) node = store_->Get(*FindResource("", "v1", "nodes"), "", node_name);
      error = ForwardPodLog(pod.body, !node_name.empty() && node.code == 200 ? &node.body : nullptr,
                            req, conn);
    } else {
      std::string subpath;
      for (size_t k = 5; k < rest.size(); ++k) absl::StrAppend(&subpath, "/", rest[k]);
      if (rest.size() > 5 && !req.path.empty() && req.path.back() == '/') subpath += "/";
      error = ForwardPodProxy(pod.body, rest[3], subpath, req, conn);
    }
    if (error) WriteApi(conn, req, *error);
    return;
  }
  const ResourceType* rt = plural.empty() ? nullptr : FindResource(group, version, plural);
  if (rt != nullptr && !rt->namespaced && !ns.empty()) rt = nullptr;
  if (rt != nullptr && rt->namespaced && ns.empty() && !name.empty()) rt = nullptr;
  if (rt != nullptr && rt->custom && sub == "status" && !rt->has_status && !name.empty()) {
    // A CRD without the status subresource: the server answers as for a
    // missing object (Volcano's PodGroup).
    StatusDetails d;
    d.name = name;
    d.group = rt->group;
    d.kind = rt->plural;
    WriteApi(conn, req,
             StatusResult(404, "NotFound",
                          absl::StrCat(rt->GroupResource(), " \"", name, "\" not found"), d));
    return;
  }
  if (rt != nullptr && rt->group.empty() && rt->plural == "pods" && sub == "binding" &&
      !name.empty() && !anonymous) {
    if (req.method == "POST") {
      WriteApi(conn, req, store_->Bind(ns, name, req.body));
    } else {
      WriteApi(conn, req,
               StatusResult(405, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource",
                            StatusDetails{}));
    }
    return;
  }
  // <plural>/<name>/scale of a CRD with subresources.scale.
  if (rt != nullptr && rt->custom && sub == "scale" && !name.empty() && !anonymous &&
      rest.size() == (rt->namespaced ? 5u : 3u)) {
    auto p = presentations_.find(rt->GroupResource());
    if (p != presentations_.end() && p->second.scale) {
      WriteApi(conn, req,
               ServeScale(*store_, *rt, *p->second.scale, ns, name, req.method,
                          req.Header("content-type"), req.body));
      return;
    }
  }
  if (rt != nullptr && !sub.empty() && !(sub == "status" && rt->has_status)) rt = nullptr;
  if (rt == nullptr) {
    WriteApi(conn, req,
             StatusResult(404, "NotFound", "the server could not find the requested resource",
                          StatusDetails{}));
    return;
  }
  std::string verb = Verb(req.method, !name.empty(), watch);
  if (anonymous) {
    StatusDetails d;
    d.name = name;
    d.group = rt->group;
    d.kind = rt->plural;
    std::string scope =
        ns.empty() ? "at the cluster scope" : absl::StrCat("in the namespace \"", ns, "\"");
    std::string subject =
        name.empty() ? rt->GroupResource() : absl::StrCat(rt->GroupResource(), " \"", name, "\"");
    WriteApi(conn, req,
             StatusResult(403, "Forbidden",
                          absl::StrCat(subject, " is forbidden: User \"system:anonymous\" cannot ",
                                       verb, " resource \"", rt->plural, "\" in API group \"",
                                       rt->group, "\" ", scope),
                          d));
    return;
  }
  auto method_not_allowed = [&] {
    WriteApi(conn, req,
             StatusResult(405, "MethodNotAllowed",
                          "the server does not allow this method on the requested resource",
                          StatusDetails{}));
  };
  std::string content_type = req.Header("content-type");
  std::string media = content_type.substr(0, content_type.find(';'));
  auto bad_media = [&] {
    return !media.empty() && media != "application/json" && media != "application/yaml" &&
           media != "*/*";
  };
  auto unsupported_media = [&] {
    WriteApi(conn, req,
             StatusResult(415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format - accepted media "
                          "types include: application/json, application/yaml, "
                          "application/vnd.kubernetes.protobuf",
                          std::nullopt));
  };
  if (name.empty()) {
    ListOptions lo;
    ApiResult err;
    if (req.method == "GET") {
      if (!ParseListOptions(req, &lo, &err)) {
        WriteApi(conn, req, err);
        return;
      }
      if (watch) {
        ServeWatch(req, conn, rt, ns, &lo);
        return;
      }
      WriteApi(conn, req, AsTableIfAsked(req, *rt, store_->List(*rt, ns, lo)));
      return;
    }
    if (ns.empty() && rt->namespaced) {
      method_not_allowed();
      return;
    }
    if (req.method == "POST") {
      if (bad_media()) {
        unsupported_media();
        return;
      }
      WriteApi(conn, req, store_->Create(*rt, ns, req.body, Param(req, "dryRun") == "All"));
      return;
    }
    if (req.method == "DELETE") {
      if (!ParseListOptions(req, &lo, &err)) {
        WriteApi(conn, req, err);
        return;
      }
      WriteApi(conn, req, store_->DeleteCollection(*rt, ns, lo));
      return;
    }
    method_not_allowed();
    return;
  }
  bool status = sub == "status";
  if (req.method == "GET") {
    WriteApi(conn, req, AsTableIfAsked(req, *rt, store_->Get(*rt, ns, name)));
  } else if (req.method == "PUT") {
    if (bad_media()) {
      unsupported_media();
      return;
    }
    WriteApi(conn, req, store_->Update(*rt, ns, name, req.body, status));
  } else if (req.method == "PATCH") {
    WriteApi(
        conn, req,
        store_->Patch(*rt, ns, name, content_type, req.body, status, Param(req, "fieldManager")));
  } else if (req.method == "DELETE" && !status) {
    DeleteOptions d;
    if (!req.body.empty()) {
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) {
        WriteApi(conn, req,
                 StatusResult(400, "BadRequest", "the body of the request could not be decoded",
                              std::nullopt));
        return;
      }
      d.propagation = body.value("propagationPolicy", std::string());
      if (body.value("orphanDependents", false)) d.propagation = "Orphan";
      if (body.contains("gracePeriodSeconds") && body["gracePeriodSeconds"].is_number()) {
        d.grace_period_seconds = body["gracePeriodSeconds"].get<int64_t>();
      }
      if (body.contains("preconditions") && body["preconditions"].is_object()) {
        d.precondition_uid = body["preconditions"].value("uid", std::string());
        d.precondition_rv = body["preconditions"].value("resourceVersion", std::string());
      }
    }
    if (std::string p = Param(req, "propagationPolicy"); !p.empty()) d.propagation = p;
    int64_t grace = 0;
    if (std::string g = Param(req, "gracePeriodSeconds");
        !g.empty() && absl::SimpleAtoi(g, &grace)) {
      d.grace_period_seconds = grace;
    }
    WriteApi(conn, req, store_->Delete(*rt, ns, name, d));
  } else {
    method_not_allowed();
  }
}

void KubeEmulator::ServeWatch(const HttpRequest& req, HttpConnection& conn, const void* resource,
                              const std::string& ns, const void* list_options) {
  const ResourceType& rt = *static_cast<const ResourceType*>(resource);
  const ListOptions& lo = *static_cast<const ListOptions*>(list_options);
  ApiResult error;
  std::unique_ptr<EmulatorStore::Watcher> watcher = store_->Watch(rt, ns, lo, &error);
  if (watcher == nullptr) {
    WriteApi(conn, req, error);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    watches_.push_back(&conn);
  }
  bool pretty = WantsPretty(req);
  absl::Time start = absl::Now();
  int64_t timeout_s = 0;
  absl::SimpleAtoi(Param(req, "timeoutSeconds"), &timeout_s);
  absl::Time deadline =
      timeout_s > 0 ? start + absl::Seconds(timeout_s) : start + absl::Minutes(30);
  bool bookmarks = TrueParam(req, "allowWatchBookmarks");
  absl::Time next_bookmark = start + options_.bookmark_interval;
  absl::Time pre_deadline_bookmark = absl::InfiniteFuture();
  if (timeout_s > 0 && deadline - absl::Seconds(2) > start) {
    pre_deadline_bookmark = deadline - absl::Seconds(2);
  }
  bool clean_end = conn.Write(
      "HTTP/1.1 200 OK\r\nCache-Control: no-cache, private\r\nContent-Type: "
      "application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
  // kubectl get -w asks for Tables: each event's object becomes one (not
  // BOOKMARK and ERROR events, whose objects are not the resource's).
  const bool table = WantsTable(req.Header("accept"));
  auto send = [&](const WatchEvent& ev) {
    OrderedJson line = OrderedJson::object();
    line["type"] = ev.type;
    if (table && ev.type != "BOOKMARK" && ev.type != "ERROR") {
      line["object"] = AsTableIfAsked(req, rt, ApiResult{200, ev.object, {}}).body;
    } else {
      line["object"] = ev.object;
    }
    std::string payload = GoJson(line, pretty);
    if (pretty) payload.push_back('\n');
    return conn.Write(absl::StrCat(absl::StrFormat("%x", payload.size()), "\r\n", payload, "\r\n"));
  };
  while (clean_end) {
    absl::Time now = absl::Now();
    absl::Time wake = std::min({deadline, now + absl::Milliseconds(200),
                                bookmarks ? next_bookmark : absl::InfiniteFuture(),
                                bookmarks ? pre_deadline_bookmark : absl::InfiniteFuture()});
    std::vector<WatchEvent> events;
    bool open = store_->NextEvents(watcher.get(), wake, &events);
    for (const WatchEvent& ev : events) {
      if (!send(ev)) {
        clean_end = false;
        break;
      }
    }
    if (!clean_end || conn.aborted() || conn.PeerClosed(absl::ZeroDuration())) {
      clean_end = false;
      break;
    }
    if (!open) break;  // too-old ERROR delivered, or the emulator is shutting down
    now = absl::Now();
    if (bookmarks && (now >= next_bookmark || now >= pre_deadline_bookmark)) {
      if (now >= pre_deadline_bookmark) pre_deadline_bookmark = absl::InfiniteFuture();
      if (now >= next_bookmark) next_bookmark = now + options_.bookmark_interval;
      if (!send(store_->Bookmark(rt))) {
        clean_end = false;
        break;
      }
    }
    if (now >= deadline) break;
  }
  store_->CloseWatcher(watcher.get());
  if (clean_end) {
    conn.Write("0\r\n\r\n");
  } else {
    conn.Abort();
  }
  absl::MutexLock lock(&mu_);
  watches_.erase(std::remove(watches_.begin(), watches_.end(), &conn), watches_.end());
}

}  // namespace kubetrain::testing
