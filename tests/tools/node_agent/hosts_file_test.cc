#include "tools/node_agent/hosts_file.h"

#include <gtest/gtest.h>

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;

Json Pod(const std::string& ns, const std::string& name, const std::string& index,
         const std::string& ip, const std::string& phase = "Running") {
  Json pod{
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"labels", {{"kubetrain.io/job-name", "job"}, {"kubetrain.io/replica-index", index}}}}},
      {"status", {{"phase", phase}}}};
  if (!ip.empty()) pod["status"]["podIP"] = ip;
  return pod;
}

Json Service(const std::string& ns, const std::string& name, const std::string& index) {
  return {
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"spec",
       {{"clusterIP", "None"},
        {"selector", {{"kubetrain.io/job-name", "job"}, {"kubetrain.io/replica-index", index}}}}}};
}

TEST(HostsFileTest, EachServiceResolvesToItsPodInEveryDnsForm) {
  const std::vector<Json> pods = {Pod("a", "job-worker-0", "0", "10.244.0.2"),
                                  Pod("a", "job-worker-1", "1", "10.244.0.3")};
  const std::vector<Json> services = {Service("a", "job-worker-0", "0"),
                                      Service("a", "job-worker-1", "1")};
  const std::string hosts = HostsFile("a", "job-worker-0", "10.244.0.2", services, pods);
  EXPECT_NE(hosts.find("127.0.0.1\tlocalhost\n"), std::string::npos) << hosts;
  EXPECT_NE(hosts.find("10.244.0.2\tjob-worker-0\n"), std::string::npos) << hosts;
  EXPECT_NE(hosts.find("10.244.0.3\tjob-worker-1.a.svc.cluster.local job-worker-1.a.svc "
                       "job-worker-1.a job-worker-1\n"),
            std::string::npos)
      << hosts;
}

TEST(HostsFileTest, NoAddressWithoutALivePodOfTheServicesNamespace) {
  const std::vector<Json> pods = {Pod("a", "job-worker-0", "0", ""),                 // no IP yet
                                  Pod("b", "job-worker-1", "1", "10.244.0.9"),       // other ns
                                  Pod("a", "old", "2", "10.244.0.8", "Succeeded")};  // ended
  const std::vector<Json> services = {Service("a", "job-worker-0", "0"),
                                      Service("a", "job-worker-1", "1"),
                                      Service("a", "job-worker-2", "2")};
  const std::string hosts = HostsFile("a", "me", "10.244.0.5", services, pods);
  EXPECT_EQ(hosts.find("job-worker"), std::string::npos) << hosts;
}

TEST(HostsFileTest, OtherNamespacesResolveOnlyByQualifiedNames) {
  const std::vector<Json> pods = {Pod("b", "job-ps-0", "0", "10.244.0.9")};
  const std::vector<Json> services = {Service("b", "job-ps-0", "0")};
  const std::string hosts = HostsFile("a", "me", "10.244.0.5", services, pods);
  EXPECT_NE(hosts.find("10.244.0.9\tjob-ps-0.b.svc.cluster.local job-ps-0.b.svc job-ps-0.b\n"),
            std::string::npos)
      << hosts;
}

}  // namespace
}  // namespace kubetrain::node_agent
