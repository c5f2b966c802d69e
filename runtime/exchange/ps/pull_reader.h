// ReadPull: a pull's frames from a gRPC stream (grpc_frame.h) into the
// caller's range. The one decoder of pulled parameters on the worker side:
// the gRPC step transport's PushPull stream and ShardClient's Pull call both
// read with it. Pure; thread-compatible.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PULL_READER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PULL_READER_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "runtime/exchange/ps/step_transport.h"

namespace kubetrain::ps {

// Reads frames from `next` (false: the stream ended) until `out`, the range
// at `offset`, is covered, and fills `*reply` from the first frame's head.
// `*any` says whether a frame arrived at all (the server had answered).
// DataLoss naming `shard` for a corrupt frame, one out of order or beyond
// the range, or a stream that ended short; the caller ends its call then.
absl::Status ReadPull(const std::string& shard, const std::function<bool(grpc::ByteBuffer*)>& next,
                      std::span<float> out, int64_t offset, PullReply* reply, bool* any);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PULL_READER_H_
