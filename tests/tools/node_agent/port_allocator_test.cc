#include "tools/node_agent/port_allocator.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <set>

namespace kubetrain::node_agent {
namespace {

bool CanBind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST(LoopbackPortAllocatorTest, HandsOutDistinctFreeUnprivilegedPorts) {
  LoopbackPortAllocator ports;
  std::set<int> seen;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<int> port = ports.Allocate();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, 1024);
    EXPECT_LE(*port, 65535);
    EXPECT_TRUE(seen.insert(*port).second) << "port " << *port << " handed out twice";
    EXPECT_TRUE(CanBind(*port)) << *port;
  }
}

}  // namespace
}  // namespace kubetrain::node_agent
