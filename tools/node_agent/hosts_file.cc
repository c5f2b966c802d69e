#include "tools/node_agent/hosts_file.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "operator/kube/object.h"

namespace kubetrain::node_agent {

using Json = nlohmann::json;

std::string HostsFile(const std::string& pod_namespace, const std::string& pod_name,
                      const std::string& pod_ip, const std::vector<Json>& services,
                      const std::vector<Json>& pods) {
  std::string out =
      "# Written by kubetrain-node-agent: the job's Services as cluster DNS would answer.\n"
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  if (!pod_ip.empty()) absl::StrAppend(&out, pod_ip, "\t", pod_name, "\n");
  // Live pods with an IP, by namespace and name.
  std::map<std::pair<std::string, std::string>, const Json*> candidates;
  for (const Json& pod : pods) {
    if (kube::StringAt(pod, {"status", "podIP"}).empty()) continue;
    const std::string phase = kube::StringAt(pod, {"status", "phase"});
    if (phase == "Succeeded" || phase == "Failed") continue;
    candidates[{kube::Namespace(pod), kube::Name(pod)}] = &pod;
  }
  std::map<std::pair<std::string, std::string>, std::string> lines;  // (ns, svc) -> line
  for (const Json& service : services) {
    if (!service.contains("spec") || !service["spec"].contains("selector") ||
        !service["spec"]["selector"].is_object() || service["spec"]["selector"].empty()) {
      continue;
    }
    const std::string ns = kube::Namespace(service);
    const Json& selector = service["spec"]["selector"];
    for (const auto& [key, pod] : candidates) {
      if (key.first != ns) continue;
      bool match = true;
      for (const auto& [label, value] : selector.items()) {
        if (!value.is_string() || kube::Label(*pod, label) != value.get<std::string>()) {
          match = false;
          break;
        }
      }
      if (!match) continue;
      const std::string svc = kube::Name(service);
      std::string line = absl::StrCat(kube::StringAt(*pod, {"status", "podIP"}), "\t", svc, ".", ns,
                                      ".svc.cluster.local ", svc, ".", ns, ".svc ", svc, ".", ns);
      // The short name only inside the Service's own namespace, as with
      // the cluster DNS search path.
      if (ns == pod_namespace) absl::StrAppend(&line, " ", svc);
      lines[{ns, svc}] = line + "\n";
      break;
    }
  }
  for (const auto& [svc, line] : lines) out += line;
  return out;
}

}  // namespace kubetrain::node_agent
