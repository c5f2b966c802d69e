// NetnsNetwork: each pod in its own network namespace (`ip netns`), joined to
// the host by a veth pair whose host end is on a Linux bridge that holds the
// gateway address; one address per pod from a /24. The pod's /etc/hosts is
// /etc/netns/<ns>/hosts, which `ip netns exec` bind-mounts over /etc/hosts.
// The host reaches every pod address through the bridge (the operator's
// progress poller scrapes pods that way). Needs CAP_NET_ADMIN and
// CAP_SYS_ADMIN (root). Not thread-safe: one caller.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_NETNS_NETWORK_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_NETNS_NETWORK_H_

#include <map>
#include <set>
#include <string>

#include "tools/node_agent/command_runner.h"
#include "tools/node_agent/pod_network.h"

namespace kubetrain::node_agent {

struct NetnsOptions {
  std::string bridge = "kt0";
  // The first three octets of the /24; the bridge takes .1, pods .2-.254.
  std::string subnet_prefix = "10.244.0";
  // Names of namespaces and links start with this (at most 4 characters:
  // link names are at most 15).
  std::string name_prefix = "kt";
  // The last octets pods get (agents sharing the bridge and subnet take
  // disjoint ranges).
  int first_octet = 2;
  int last_octet = 254;
  std::string hosts_root = "/etc/netns";     // <hosts_root>/<ns>/hosts
  std::string netns_run_dir = "/run/netns";  // where `ip netns` keeps names
};

class NetnsNetwork final : public PodNetwork {
 public:
  // Borrows `runner`.
  NetnsNetwork(CommandRunner& runner, NetnsOptions options);

  // Creates the bridge (or reuses it) and deletes namespaces named with the
  // prefix that a previous agent left behind.
  absl::Status Init() override;
  absl::StatusOr<PodAttachment> Attach(const std::string& pod_key, const std::string& uid) override;
  absl::Status WriteHosts(const PodAttachment& attachment, const std::string& contents) override;
  absl::Status Detach(const PodAttachment& attachment) override;
  std::string Describe() const override;

  std::string gateway() const { return options_.subnet_prefix + ".1"; }

 private:
  CommandRunner& runner_;
  const NetnsOptions options_;
  std::set<int> used_;  // last octets in use
  int last_ = -1;       // the last octet handed out (-1: none yet)
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_NETNS_NETWORK_H_
