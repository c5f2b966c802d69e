#include "tools/node_agent/netns_network.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_join.h"
#include "tests/support/temp_files.h"

namespace kubetrain::node_agent {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

class RecordingRunner final : public CommandRunner {
 public:
  absl::Status Run(const std::vector<std::string>& argv) override {
    const std::string line = absl::StrJoin(argv, " ");
    commands.push_back(line);
    if (!fail_with.empty() && line.find(fail_with) != std::string::npos) {
      return absl::InternalError("RTNETLINK answers: Operation not permitted");
    }
    return absl::OkStatus();
  }
  std::vector<std::string> commands;
  std::string fail_with;
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class NetnsNetworkTest : public ::testing::Test {
 protected:
  NetnsOptions Options() {
    NetnsOptions o;
    o.bridge = "ktb";
    o.subnet_prefix = "10.9.8";
    o.hosts_root = dir_.File("etc-netns");
    o.netns_run_dir = dir_.File("run-netns");
    return o;
  }
  data::testing_util::TempDir dir_;
  RecordingRunner runner_;
};

TEST_F(NetnsNetworkTest, AttachBuildsANamespaceVethAndHostsFile) {
  NetnsNetwork net(runner_, Options());
  ASSERT_TRUE(net.Init().ok());
  EXPECT_THAT(runner_.commands, Contains("ip addr replace 10.9.8.1/24 dev ktb"));
  runner_.commands.clear();
  absl::StatusOr<PodAttachment> a = net.Attach("ns/pod", "0a1b2c3d-4e5f");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->ip, "10.9.8.2");
  EXPECT_EQ(a->netns, "kt-0a1b2c3d");
  EXPECT_EQ(a->host_link, "kth0a1b2c3d");
  EXPECT_THAT(a->exec_prefix, ::testing::ElementsAre("ip", "netns", "exec", "kt-0a1b2c3d"));
  EXPECT_THAT(runner_.commands, Contains("ip netns add kt-0a1b2c3d"));
  EXPECT_THAT(runner_.commands, Contains("ip -n kt-0a1b2c3d addr add 10.9.8.2/24 dev eth0"));
  EXPECT_THAT(runner_.commands, Contains("ip -n kt-0a1b2c3d route add default via 10.9.8.1"));
  EXPECT_THAT(runner_.commands, Contains("ip link set kth0a1b2c3d master ktb"));
  // Hosts are rewritten in place: the inode `ip netns exec` bind-mounts stays.
  const std::string hosts = dir_.File("etc-netns/kt-0a1b2c3d/hosts");
  const auto inode = std::filesystem::status(hosts).type();
  ASSERT_EQ(inode, std::filesystem::file_type::regular);
  ASSERT_TRUE(net.WriteHosts(*a, "10.9.8.3\tjob-ps-0\n").ok());
  EXPECT_EQ(Read(hosts), "10.9.8.3\tjob-ps-0\n");
}

// Round robin, as host-local IPAM: a pod recreated at once does not get the
// address its predecessor just gave back (peers' ARP caches still map it to
// a veth that is gone); freed addresses come back once the range wraps.
TEST_F(NetnsNetworkTest, AddressesAreUniqueAndHandedOutRoundRobin) {
  NetnsNetwork net(runner_, Options());
  absl::StatusOr<PodAttachment> a = net.Attach("ns/a", "aaaaaaaa");
  absl::StatusOr<PodAttachment> b = net.Attach("ns/b", "bbbbbbbb");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ip, "10.9.8.2");
  EXPECT_EQ(b->ip, "10.9.8.3");
  ASSERT_TRUE(net.Detach(*a).ok());
  EXPECT_THAT(runner_.commands, Contains("ip netns del kt-aaaaaaaa"));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("etc-netns/kt-aaaaaaaa")));
  absl::StatusOr<PodAttachment> c = net.Attach("ns/c", "cccccccc");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ip, "10.9.8.4");
}

TEST_F(NetnsNetworkTest, AFreedAddressComesBackWhenTheRangeWraps) {
  NetnsOptions o = Options();
  o.last_octet = 4;  // .2 .3 .4
  NetnsNetwork net(runner_, o);
  absl::StatusOr<PodAttachment> a = net.Attach("ns/a", "aaaaaaaa");
  absl::StatusOr<PodAttachment> b = net.Attach("ns/b", "bbbbbbbb");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(net.Detach(*a).ok());
  EXPECT_EQ(net.Attach("ns/c", "cccccccc")->ip, "10.9.8.4");
  EXPECT_EQ(net.Attach("ns/d", "dddddddd")->ip, "10.9.8.2");
  EXPECT_FALSE(net.Attach("ns/e", "eeeeeeee").ok());  // all three in use
}

TEST_F(NetnsNetworkTest, AFailedStepCleansUpAndNamesThePod) {
  NetnsNetwork net(runner_, Options());
  runner_.fail_with = "type veth";
  absl::StatusOr<PodAttachment> a = net.Attach("ns/pod", "dddddddd");
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("network for ns/pod"));
  EXPECT_THAT(runner_.commands, Contains("ip netns del kt-dddddddd"));
  // The address was not taken.
  runner_.fail_with.clear();
  EXPECT_EQ(net.Attach("ns/pod", "dddddddd")->ip, "10.9.8.2");
}

TEST_F(NetnsNetworkTest, InitWithoutPermissionSaysRootIsNeeded) {
  runner_.fail_with = "ip link";  // show and add both refused
  NetnsNetwork net(runner_, Options());
  absl::Status s = net.Init();
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("need root"));
}

TEST_F(NetnsNetworkTest, InitRemovesNamespacesAPreviousAgentLeft) {
  std::filesystem::create_directories(dir_.File("run-netns"));
  std::ofstream(dir_.File("run-netns/kt-stale01")).put('x');
  std::ofstream(dir_.File("run-netns/other")).put('x');
  NetnsNetwork net(runner_, Options());
  ASSERT_TRUE(net.Init().ok());
  EXPECT_THAT(runner_.commands, Contains("ip netns del kt-stale01"));
  EXPECT_THAT(runner_.commands, ::testing::Not(Contains("ip netns del other")));
}

// Two agents on one machine share the bridge and the /24: each takes its
// own address range and namespace prefix, and leaves the other's alone.
TEST_F(NetnsNetworkTest, TwoAgentsShareTheBridgeWithoutTouchingEachOther) {
  std::filesystem::create_directories(dir_.File("run-netns"));
  std::ofstream(dir_.File("run-netns/kt-ofagent1")).put('x');
  NetnsOptions second = Options();
  second.name_prefix = "ktb";
  second.first_octet = 128;
  second.last_octet = 129;
  NetnsNetwork net(runner_, second);
  ASSERT_TRUE(net.Init().ok());
  EXPECT_THAT(runner_.commands, ::testing::Not(Contains("ip netns del kt-ofagent1")));
  absl::StatusOr<PodAttachment> a = net.Attach("ns/a", "aaaaaaaa");
  absl::StatusOr<PodAttachment> b = net.Attach("ns/b", "bbbbbbbb");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ip, "10.9.8.128");
  EXPECT_EQ(b->ip, "10.9.8.129");
  EXPECT_EQ(a->netns, "ktb-aaaaaaaa");
  absl::StatusOr<PodAttachment> c = net.Attach("ns/c", "cccccccc");
  EXPECT_TRUE(absl::IsResourceExhausted(c.status())) << c.status();
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("10.9.8.128-129"));
}

}  // namespace
}  // namespace kubetrain::node_agent
