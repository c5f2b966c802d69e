#include "runtime/launcher/loopback_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace kubetrain::launcher {

namespace {

// Lower bound of the ephemeral range; 32768 when it cannot be read.
int EphemeralLow() {
  int low = 32768, high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  return low;
}

}  // namespace

absl::StatusOr<std::vector<int>> AllocateLoopbackPorts(int count) {
  // Unprivileged ports below the ephemeral range.
  const int hi = std::max(EphemeralLow(), 2048);
  const int lo = std::max(1024, hi - 12000);
  const int span = hi - lo;
  std::mt19937 rng(std::random_device{}());
  int candidate = lo + static_cast<int>(rng() % static_cast<unsigned>(span));
  std::vector<int> sockets;
  std::vector<int> ports;
  absl::Status status;
  for (int tried = 0; static_cast<int>(ports.size()) < count; ++tried) {
    if (tried >= span) {
      status =
          absl::ResourceExhaustedError(absl::StrCat("no ", count, " free TCP ports between ", lo,
                                                    " and ", hi, " (below the ephemeral range)"));
      break;
    }
    const int port = candidate;
    candidate = candidate + 1 >= hi ? lo : candidate + 1;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = absl::InternalError(absl::StrCat("socket failed: ", std::strerror(errno)));
      break;
    }
    sockaddr_in addr;
    std::memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);  // in use: try the next one
      continue;
    }
    sockets.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : sockets) close(fd);
  if (!status.ok()) return status;
  return ports;
}

}  // namespace kubetrain::launcher
