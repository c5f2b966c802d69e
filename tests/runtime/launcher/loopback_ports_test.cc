#include "runtime/launcher/loopback_ports.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>

#include "gtest/gtest.h"

namespace kubetrain::launcher {
namespace {

TEST(LoopbackPorts, DistinctBindablePortsBelowTheEphemeralRange) {
  int low = 32768, high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    ASSERT_EQ(std::fscanf(f, "%d %d", &low, &high), 2);
    std::fclose(f);
  }
  absl::StatusOr<std::vector<int>> ports = AllocateLoopbackPorts(20);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 20u);
  EXPECT_EQ(std::set<int>(ports->begin(), ports->end()).size(), 20u);
  for (int p : *ports) {
    EXPECT_GE(p, 1024);
    EXPECT_LT(p, low) << "an ephemeral port could be taken by any outgoing connection";
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr;
    std::memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(p));
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << p;
    close(fd);
  }
}

}  // namespace
}  // namespace kubetrain::launcher
