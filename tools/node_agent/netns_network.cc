#include "tools/node_agent/netns_network.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace kubetrain::node_agent {
namespace {

namespace fs = std::filesystem;

// Writes `contents` into the existing inode (truncate + write, no rename):
// `ip netns exec` bind-mounts this very file, so a renamed replacement would
// stay invisible to running pods.
absl::Status WriteInPlace(const std::string& path, const std::string& contents) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string err = std::strerror(errno);
      close(fd);
      return absl::InternalError(absl::StrCat("write ", path, ": ", err));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

NetnsNetwork::NetnsNetwork(CommandRunner& runner, NetnsOptions options)
    : runner_(runner), options_(std::move(options)) {}

absl::Status NetnsNetwork::Init() {
  std::error_code ec;
  // Namespaces a previous agent left (killed without its SIGTERM clean-up).
  if (fs::is_directory(options_.netns_run_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(options_.netns_run_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!absl::StartsWith(name, options_.name_prefix + "-")) continue;
      (void)runner_.Run({"ip", "netns", "del", name});
      fs::remove_all(fs::path(options_.hosts_root) / name, ec);
    }
  }
  if (!runner_.Run({"ip", "link", "show", options_.bridge}).ok()) {
    if (absl::Status s = runner_.Run({"ip", "link", "add", options_.bridge, "type", "bridge"});
        !s.ok()) {
      return absl::PermissionDeniedError(absl::StrCat("cannot create bridge ", options_.bridge,
                                                      " (network namespaces need "
                                                      "root): ",
                                                      s.message()));
    }
  }
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"ip", "addr", "replace", gateway() + "/24", "dev", options_.bridge},
           {"ip", "link", "set", options_.bridge, "up"}}) {
    if (absl::Status s = runner_.Run(cmd); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<PodAttachment> NetnsNetwork::Attach(const std::string& pod_key,
                                                   const std::string& uid) {
  // Round robin from the last address handed out, as host-local IPAM does:
  // a pod recreated at once gets another address than the one it lost, so
  // no peer's neighbour (ARP) cache still points the old address at a veth
  // that is gone (measured: a lost worker 0's replacement at the same
  // address was unreachable for 30-50 s).
  int octet = 0;
  const int span = options_.last_octet - options_.first_octet + 1;
  const int from = last_ < 0 ? options_.first_octet - 1 : last_;
  for (int k = 1; k <= span; ++k) {
    const int i = options_.first_octet + ((from - options_.first_octet + k) % span + span) % span;
    if (!used_.count(i)) {
      octet = i;
      break;
    }
  }
  if (octet == 0) {
    return absl::ResourceExhaustedError(absl::StrCat("no free address in ", options_.subnet_prefix,
                                                     ".", options_.first_octet, "-",
                                                     options_.last_octet, " for ", pod_key));
  }
  std::string id = absl::StrReplaceAll(uid, {{"-", ""}}).substr(0, 8);
  if (id.empty()) id = absl::StrCat(octet);
  PodAttachment a;
  a.ip = absl::StrCat(options_.subnet_prefix, ".", octet);
  a.netns = absl::StrCat(options_.name_prefix, "-", id);
  a.host_link = absl::StrCat(options_.name_prefix, "h", id);
  const std::string peer = absl::StrCat(options_.name_prefix, "p", id);
  a.exec_prefix = {"ip", "netns", "exec", a.netns};
  const std::vector<std::vector<std::string>> commands = {
      {"ip", "netns", "add", a.netns},
      {"ip", "link", "add", a.host_link, "type", "veth", "peer", "name", peer},
      {"ip", "link", "set", peer, "netns", a.netns},
      {"ip", "-n", a.netns, "link", "set", peer, "name", "eth0"},
      {"ip", "-n", a.netns, "addr", "add", a.ip + "/24", "dev", "eth0"},
      {"ip", "-n", a.netns, "link", "set", "eth0", "up"},
      {"ip", "-n", a.netns, "link", "set", "lo", "up"},
      {"ip", "-n", a.netns, "route", "add", "default", "via", gateway()},
      {"ip", "link", "set", a.host_link, "master", options_.bridge},
      {"ip", "link", "set", a.host_link, "up"},
  };
  for (const auto& cmd : commands) {
    if (absl::Status s = runner_.Run(cmd); !s.ok()) {
      (void)runner_.Run({"ip", "netns", "del", a.netns});
      (void)runner_.Run({"ip", "link", "del", a.host_link});
      return absl::Status(s.code(), absl::StrCat("network for ", pod_key, ": ", s.message()));
    }
  }
  std::error_code ec;
  fs::create_directories(fs::path(options_.hosts_root) / a.netns, ec);
  if (ec) {
    (void)runner_.Run({"ip", "netns", "del", a.netns});
    return absl::InternalError(
        absl::StrCat("mkdir ", options_.hosts_root, "/", a.netns, ": ", ec.message()));
  }
  // No nameserver: a name the hosts file lacks fails at once (nothing
  // listens on the namespace's own loopback port 53) instead of waiting on a
  // server the namespace cannot reach.
  absl::Status resolv =
      WriteInPlace((fs::path(options_.hosts_root) / a.netns / "resolv.conf").string(),
                   "# Written by kubetrain-node-agent: names resolve through /etc/hosts only.\n"
                   "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n");
  if (!resolv.ok()) {
    (void)runner_.Run({"ip", "netns", "del", a.netns});
    return resolv;
  }
  if (absl::Status s = WriteHosts(a, "127.0.0.1\tlocalhost\n"); !s.ok()) {
    (void)runner_.Run({"ip", "netns", "del", a.netns});
    return s;
  }
  used_.insert(octet);
  last_ = octet;
  return a;
}

absl::Status NetnsNetwork::WriteHosts(const PodAttachment& attachment,
                                      const std::string& contents) {
  return WriteInPlace((fs::path(options_.hosts_root) / attachment.netns / "hosts").string(),
                      contents);
}

absl::Status NetnsNetwork::Detach(const PodAttachment& attachment) {
  absl::Status result = runner_.Run({"ip", "netns", "del", attachment.netns});
  // Deleting the namespace deletes the pair; this only matters when the
  // namespace was already gone.
  (void)runner_.Run({"ip", "link", "del", attachment.host_link});
  std::error_code ec;
  fs::remove_all(fs::path(options_.hosts_root) / attachment.netns, ec);
  const std::string prefix = options_.subnet_prefix + ".";
  if (absl::StartsWith(attachment.ip, prefix)) {
    int octet = 0;
    if (absl::SimpleAtoi(attachment.ip.substr(prefix.size()), &octet)) used_.erase(octet);
  }
  return result;
}

std::string NetnsNetwork::Describe() const {
  return absl::StrCat("a network namespace per pod on bridge ", options_.bridge, " (",
                      options_.subnet_prefix, ".0/24, gateway ", gateway(), ")");
}

}  // namespace kubetrain::node_agent
