#include "testing/kube_emulator_admission.h"

#include <curl/curl.h>

#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "testing/label_selector.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

bool ListHas(const json& list, const std::string& value) {
  if (!list.is_array()) return false;
  for (const json& v : list) {
    if (v.is_string() && (v.get<std::string>() == "*" || v.get<std::string>() == value))
      return true;
  }
  return false;
}

bool ResourceMatches(const json& resources, const std::string& plural, const std::string& sub) {
  if (!resources.is_array()) return false;
  for (const json& v : resources) {
    if (!v.is_string()) continue;
    const std::string r = v.get<std::string>();
    if (r == "*/*") return true;
    if (sub.empty() ? (r == "*" || r == plural)
                    : (r == absl::StrCat(plural, "/", sub) || r == absl::StrCat(plural, "/*") ||
                       r == absl::StrCat("*/", sub))) {
      return true;
    }
  }
  return false;
}

bool RuleMatches(const json& rule, const AdmissionAttributes& a) {
  if (!rule.is_object()) return false;
  if (!ListHas(rule.value("operations", json()), a.operation)) return false;
  if (!ListHas(rule.value("apiGroups", json()), a.rt->group)) return false;
  if (!ListHas(rule.value("apiVersions", json()), a.rt->version)) return false;
  if (!ResourceMatches(rule.value("resources", json()), a.rt->plural, a.sub_resource)) return false;
  const std::string scope = rule.value("scope", std::string("*"));
  if (scope == "Namespaced" && !a.rt->namespaced) return false;
  if (scope == "Cluster" && a.rt->namespaced) return false;
  return true;
}

bool SelectorMatches(const json& selector, const json& labels) {
  absl::StatusOr<kube::LabelSelector> s = kube::LabelSelector::FromJson(selector);
  return s.ok() && s->Matches(labels);
}

json Labels(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return json();
  }
  return object["metadata"].value("labels", json());
}

size_t OnData(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// POSTs `review` to `url`, trusting `ca_pem`; the body of a 200, else why not.
absl::StatusOr<std::string> Post(const std::string& url, const std::string& ca_pem,
                                 const std::string& review, long timeout_seconds) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  std::string body;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_seconds);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, review.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(review.size()));
  curl_blob ca{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
  if (!ca_pem.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  const CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("Post \"", url, "\": ", curl_easy_strerror(rc)));
  }
  if (code != 200) {
    return absl::UnavailableError(
        absl::StrCat("the server responded with status ", code, ": ", body));
  }
  return body;
}

std::string NewUid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t a = rng(), b = rng();
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                         b >> 48, b & 0xffffffffffffULL);
}

json Review(const AdmissionAttributes& a, const std::string& uid) {
  json request = {
      {"uid", uid},
      {"kind", {{"group", a.kind_group}, {"version", a.kind_version}, {"kind", a.kind}}},
      {"resource",
       {{"group", a.rt->group}, {"version", a.rt->version}, {"resource", a.rt->plural}}},
      {"requestKind", {{"group", a.kind_group}, {"version", a.kind_version}, {"kind", a.kind}}},
      {"requestResource",
       {{"group", a.rt->group}, {"version", a.rt->version}, {"resource", a.rt->plural}}},
      {"name", a.name},
      {"operation", a.operation},
      {"userInfo", {{"username", "kubetrain-api-emulator"}}},
      {"object", a.object.is_null() ? json() : a.object},
      {"oldObject", a.old_object.is_null() ? json() : a.old_object},
      {"dryRun", false}};
  if (!a.sub_resource.empty()) {
    request["subResource"] = a.sub_resource;
    request["requestSubResource"] = a.sub_resource;
  }
  if (a.rt->namespaced) request["namespace"] = a.ns;
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request", std::move(request)}};
}

// One webhook's verdict: nullopt to go on.
std::optional<ApiResult> Call(const json& webhook, const AdmissionAttributes& a) {
  const std::string name = webhook.value("name", std::string());
  const bool fail_closed = webhook.value("failurePolicy", std::string("Fail")) != "Ignore";
  auto failed = [&](const std::string& why) -> std::optional<ApiResult> {
    if (!fail_closed) return std::nullopt;
    return StatusResult(
        500, "InternalError",
        absl::StrCat("Internal error occurred: failed calling webhook \"", name, "\": ", why),
        StatusDetails{});
  };
  const json cc = webhook.value("clientConfig", json::object());
  const std::string url = cc.is_object() ? cc.value("url", std::string()) : "";
  if (url.empty()) return failed("the API emulator reaches webhooks by clientConfig.url only");
  std::string ca_pem;
  if (cc.contains("caBundle") && cc["caBundle"].is_string() &&
      !absl::Base64Unescape(cc["caBundle"].get<std::string>(), &ca_pem)) {
    return failed("clientConfig.caBundle is not base64");
  }
  const std::string uid = NewUid();
  absl::StatusOr<std::string> answer =
      Post(url, ca_pem, Review(a, uid).dump(), webhook.value("timeoutSeconds", 10L));
  if (!answer.ok()) return failed(std::string(answer.status().message()));
  const json review = json::parse(*answer, nullptr, false);
  if (review.is_discarded() || !review.is_object() || !review.contains("response") ||
      !review["response"].is_object()) {
    return failed("expected response.uid in the AdmissionReview");
  }
  const json& r = review["response"];
  if (r.value("uid", std::string()) != uid) {
    return failed(absl::StrCat("expected response.uid=\"", uid, "\", got \"",
                               r.value("uid", std::string()), "\""));
  }
  if (r.value("allowed", false)) return std::nullopt;
  const json status = r.value("status", json::object());
  const int code = status.is_object() ? status.value("code", 403) : 403;
  const std::string reason =
      status.is_object() ? status.value("reason", std::string("Forbidden")) : "Forbidden";
  const std::string message = status.is_object() ? status.value("message", std::string()) : "";
  StatusDetails details;
  if (status.is_object() && status.contains("details") && status["details"].is_object()) {
    const json& d = status["details"];
    if (d.contains("causes") && d["causes"].is_array()) {
      for (const json& c : d["causes"]) {
        if (!c.is_object()) continue;
        details.causes.push_back({c.value("type", std::string()), c.value("message", std::string()),
                                  c.value("field", std::string())});
      }
    }
  }
  return StatusResult(code == 0 ? 403 : code, reason,
                      absl::StrCat("admission webhook \"", name, "\" denied the request",
                                   message.empty() ? " without explanation" : ": ", message),
                      details);
}

}  // namespace

std::optional<ApiResult> RunValidatingWebhooks(const json& configurations,
                                               const AdmissionAttributes& a) {
  if (!configurations.is_array() || a.rt == nullptr) return std::nullopt;
  for (const json& config : configurations) {
    if (!config.is_object() || !config.contains("webhooks") || !config["webhooks"].is_array()) {
      continue;
    }
    for (const json& webhook : config["webhooks"]) {
      if (!webhook.is_object()) continue;
      bool matched = false;
      for (const json& rule : webhook.value("rules", json::array())) {
        if (RuleMatches(rule, a)) matched = true;
      }
      if (!matched) continue;
      if (a.rt->namespaced && webhook.contains("namespaceSelector") &&
          !SelectorMatches(webhook["namespaceSelector"], json(a.namespace_labels))) {
        continue;
      }
      if (webhook.contains("objectSelector") &&
          !SelectorMatches(webhook["objectSelector"], Labels(a.object)) &&
          !SelectorMatches(webhook["objectSelector"], Labels(a.old_object))) {
        continue;
      }
      if (std::optional<ApiResult> refused = Call(webhook, a)) return refused;
    }
  }
  return std::nullopt;
}

}  // namespace kubetrain::testing
