// KubeletRequest and KubeletReply: one request to the node agent's kubelet
// port and the way its answer goes back, apart from the transport
// (kubelet_server.h serves them over HTTPS; tests use a fake reply).
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_REQUEST_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_REQUEST_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace kubetrain::node_agent {

struct KubeletRequest {
  std::string method;                        // "GET"
  std::string path;                          // percent-decoded
  std::map<std::string, std::string> query;  // decoded; the last value wins
};

// Not thread-safe: the one handler thread of its request uses it.
class KubeletReply {
 public:
  virtual ~KubeletReply() = default;
  // Sends body bytes of a 200 text/plain answer (the header goes with the
  // first call, which may be empty, so a follow shows at once). False once
  // the client went away.
  virtual bool Write(std::string_view bytes) = 0;
  // An error answer: `code` and the text as the body, as the kubelet writes
  // them. Only before the first Write.
  virtual void Fail(int code, const std::string& text) = 0;
  // Waits up to `wait` for the client to go away (or the server to stop):
  // true when it did, false when the wait ran out.
  virtual bool Gone(absl::Duration wait) = 0;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_REQUEST_H_
