#include "testing/kube_emulator_pod_proxy.h"

#include <curl/curl.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kubetrain::testing {
namespace {

std::string At(const OrderedJson& j, std::initializer_list<const char*> path) {
  const OrderedJson* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object() || !cur->contains(k)) return "";
    cur = &(*cur)[k];
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

ApiResult PodLogStatus(int code, const std::string& reason, const std::string& message,
                       const std::string& pod) {
  StatusDetails d;
  d.name = pod;
  d.kind = "pods/log";
  return StatusResult(code, reason, message, d);
}

const char* Phrase(long code) {
  switch (code) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 500:
      return "Internal Server Error";
    default:
      return "Status";
  }
}

// One upstream GET whose answer goes to `conn` as it arrives (2xx), or is
// kept (other codes) for the caller to turn into a Status.
struct Transfer {
  HttpConnection* conn = nullptr;
  CURL* curl = nullptr;
  bool streamed_head = false;
  bool client_gone = false;
  long code = 0;
  std::string content_type;
  std::string kept;  // a non-2xx body, at most 64 KiB

  void StartHead() {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    char* ct = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
    content_type = ct != nullptr ? ct : "text/plain";
  }
  static size_t OnData(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    const size_t len = size * n;
    if (t->code == 0) t->StartHead();
    if (t->code < 200 || t->code > 206) {
      if (t->kept.size() < 64 * 1024)
        t->kept.append(data, std::min(len, 64 * 1024 - t->kept.size()));
      return len;
    }
    std::string out;
    if (!t->streamed_head) {
      t->streamed_head = true;
      out = absl::StrCat(
          "HTTP/1.1 ", t->code, " ", Phrase(t->code), "\r\nContent-Type: ", t->content_type,
          "\r\nCache-Control: no-cache, private\r\n", "Transfer-Encoding: chunked\r\n\r\n");
    }
    if (len > 0)
      absl::StrAppend(&out, absl::Hex(len), "\r\n", absl::string_view(data, len), "\r\n");
    if (!t->conn->Write(out)) {
      t->client_gone = true;
      return 0;  // aborts the transfer
    }
    return len;
  }
  // Called about once a second while the upstream is quiet (a follow):
  // a client that went away ends the transfer.
  static int OnProgress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(self);
    if (t->conn->PeerClosed(absl::ZeroDuration())) {
      t->client_gone = true;
      return 1;
    }
    return 0;
  }
};

// Runs the GET. Returns the curl error text ("" on success).
std::string Fetch(const std::string& url, bool tls_no_verify, Transfer& t) {
  CURL* curl = curl_easy_init();
  t.curl = curl;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  if (tls_no_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Transfer::OnData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &Transfer::OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  const CURLcode rc = curl_easy_perform(curl);
  if (t.code == 0) t.StartHead();
  curl_easy_cleanup(curl);
  t.curl = nullptr;
  return rc == CURLE_OK ? "" : curl_easy_strerror(rc);
}

}  // namespace

absl::StatusOr<std::string> PreferredNodeAddress(const OrderedJson& node) {
  static const char* kTypes[] = {"Hostname", "InternalDNS", "InternalIP", "ExternalDNS",
                                 "ExternalIP"};
  const OrderedJson* addresses = nullptr;
  if (node.contains("status") && node["status"].contains("addresses") &&
      node["status"]["addresses"].is_array()) {
    addresses = &node["status"]["addresses"];
  }
  for (const char* type : kTypes) {
    if (addresses != nullptr) {
      for (const OrderedJson& a : *addresses) {
        if (At(a, {"type"}) == type && !At(a, {"address"}).empty()) return At(a, {"address"});
      }
    }
    if (std::string(type) == "Hostname") {
      const std::string label = At(node, {"metadata", "labels", "kubernetes.io/hostname"});
      if (!label.empty()) return label;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no preferred addresses found; known addresses: ",
                   addresses != nullptr ? addresses->dump() : std::string("[]")));
}

KubeletLogTarget KubeletLogUrl(const OrderedJson& pod, const OrderedJson* node,
                               const HttpRequest& req) {
  const std::string name = At(pod, {"metadata", "name"});
  const std::string ns = At(pod, {"metadata", "namespace"});
  std::vector<std::string> containers;
  if (pod.contains("spec") && pod["spec"].contains("containers")) {
    for (const OrderedJson& c : pod["spec"]["containers"]) containers.push_back(At(c, {"name"}));
  }
  std::string container;
  if (auto it = req.query.find("container"); it != req.query.end()) container = it->second;
  if (container.empty()) {
    if (containers.size() != 1) {
      return {"",
              PodLogStatus(400, "BadRequest",
                           absl::StrCat("a container name must be specified for pod ", name,
                                        ", choose one of: [", absl::StrJoin(containers, " "), "]"),
                           name)};
    }
    container = containers[0];
  } else if (std::find(containers.begin(), containers.end(), container) == containers.end()) {
    return {"", PodLogStatus(400, "BadRequest",
                             absl::StrCat("container ", container, " is not valid for pod ", name),
                             name)};
  }
  const std::string node_name = At(pod, {"spec", "nodeName"});
  if (node_name.empty()) {
    return {"", PodLogStatus(400, "BadRequest",
                             absl::StrCat("pod ", name, " has no node yet: it is not scheduled"),
                             name)};
  }
  if (node == nullptr) {
    return {"", PodLogStatus(503, "ServiceUnavailable",
                             absl::StrCat("node \"", node_name, "\" of pod ", name, " not found"),
                             name)};
  }
  absl::StatusOr<std::string> host = PreferredNodeAddress(*node);
  int port = 0;
  if (node->contains("status") && (*node)["status"].contains("daemonEndpoints")) {
    const OrderedJson& e = (*node)["status"]["daemonEndpoints"];
    if (e.contains("kubeletEndpoint") && e["kubeletEndpoint"].contains("Port") &&
        e["kubeletEndpoint"]["Port"].is_number_integer()) {
      port = e["kubeletEndpoint"]["Port"].get<int>();
    }
  }
  if (!host.ok() || port <= 0) {
    return {"", PodLogStatus(503, "ServiceUnavailable",
                             absl::StrCat("no kubelet endpoint for node \"", node_name, "\": ",
                                          host.ok() ? "no daemonEndpoints.kubeletEndpoint.Port"
                                                    : std::string(host.status().message())),
                             name)};
  }
  std::string url = absl::StrCat("https://", *host, ":", port, "/containerLogs/", Escape(ns), "/",
                                 Escape(name), "/", Escape(container));
  std::vector<std::string> params;
  for (const char* p : {"follow", "previous", "tailLines", "limitBytes", "sinceSeconds",
                        "sinceTime", "timestamps"}) {
    auto it = req.query.find(p);
    if (it != req.query.end()) params.push_back(absl::StrCat(p, "=", Escape(it->second)));
  }
  if (!params.empty()) absl::StrAppend(&url, "?", absl::StrJoin(params, "&"));
  return {url, std::nullopt};
}

std::optional<ApiResult> ForwardPodLog(const OrderedJson& pod, const OrderedJson* node,
                                       const HttpRequest& req, HttpConnection& conn) {
  KubeletLogTarget target = KubeletLogUrl(pod, node, req);
  if (target.error) return target.error;
  const std::string name = At(pod, {"metadata", "name"});
  Transfer t;
  t.conn = &conn;
  const std::string error = Fetch(target.url, /*tls_no_verify=*/true, t);
  if (t.streamed_head) {
    if (!t.client_gone) conn.Write("0\r\n\r\n");
    conn.CloseAfterResponse();
    return std::nullopt;
  }
  if (!error.empty()) {
    return PodLogStatus(503, "ServiceUnavailable",
                        absl::StrCat("Get \"", target.url, "\": ", error), name);
  }
  if (t.code >= 200 && t.code <= 206) {  // an empty body
    conn.Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: ", t.content_type,
                            "\r\nContent-Length: 0\r\n\r\n"));
    return std::nullopt;
  }
  if (t.code == 400) return PodLogStatus(400, "BadRequest", t.kept, name);
  if (t.code == 404) {
    return PodLogStatus(
        404, "NotFound",
        absl::StrCat("the server could not find the requested resource ( pods/log ", name, ")"),
        name);
  }
  if (t.code == 500) return StatusResult(500, "InternalError", t.kept, std::nullopt);
  return PodLogStatus(static_cast<int>(t.code), "",
                      absl::StrCat("the server responded with the status code ", t.code,
                                   " but did not return more information ( pods/log ", name, ")"),
                      name);
}

std::optional<ApiResult> ForwardPodProxy(const OrderedJson& pod, const std::string& name_port,
                                         const std::string& subpath, const HttpRequest& req,
                                         HttpConnection& conn) {
  // [scheme:]name[:port]
  std::vector<std::string> parts = absl::StrSplit(name_port, ':');
  std::string scheme = "http", port;
  if (parts.size() == 3) {
    scheme = parts[0];
    port = parts[2];
  } else if (parts.size() == 2) {
    port = parts[1];
  }
  if (port.empty() && pod.contains("spec") && pod["spec"].contains("containers")) {
    for (const OrderedJson& c : pod["spec"]["containers"]) {
      if (c.contains("ports") && c["ports"].is_array() && !c["ports"].empty() &&
          c["ports"][0].contains("containerPort")) {
        port = c["ports"][0]["containerPort"].dump();
        break;
      }
    }
  }
  const std::string ip = At(pod, {"status", "podIP"});
  if (ip.empty()) {
    return StatusResult(503, "ServiceUnavailable",
                        absl::StrCat("error trying to reach service: pod ",
                                     At(pod, {"metadata", "name"}), " has no IP address yet"),
                        std::nullopt);
  }
  std::string url = absl::StrCat(scheme, "://", ip, port.empty() ? "" : ":", port,
                                 subpath.empty() ? "/" : subpath);
  const size_t q = req.target.find('?');
  if (q != std::string::npos) absl::StrAppend(&url, req.target.substr(q));
  Transfer t;
  t.conn = &conn;
  const std::string error = Fetch(url, /*tls_no_verify=*/true, t);
  if (t.streamed_head) {
    if (!t.client_gone) conn.Write("0\r\n\r\n");
    conn.CloseAfterResponse();
    return std::nullopt;
  }
  if (!error.empty()) {
    return StatusResult(503, "ServiceUnavailable",
                        absl::StrCat("error trying to reach service: ", error), std::nullopt);
  }
  // Any other answer passes through as it is.
  conn.Write(absl::StrCat("HTTP/1.1 ", t.code, " ", Phrase(t.code),
                          "\r\nContent-Type: ", t.content_type,
                          "\r\nContent-Length: ", t.kept.size(), "\r\n\r\n", t.kept));
  return std::nullopt;
}

}  // namespace kubetrain::testing
