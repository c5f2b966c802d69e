#include "runtime/exchange/ps/pull_reader.h"

#include "absl/strings/str_cat.h"
#include "runtime/exchange/ps/grpc_frame.h"

namespace kubetrain::ps {

absl::Status ReadPull(const std::string& shard, const std::function<bool(grpc::ByteBuffer*)>& next,
                      std::span<float> out, int64_t offset, PullReply* reply, bool* any) {
  grpc::ByteBuffer buffer;
  int64_t covered = 0;
  const int64_t want = static_cast<int64_t>(out.size());
  // Until the range is covered: a Pull call then ends, a PushPull stream
  // goes on with the next step.
  while (covered < want && next(&buffer)) {
    *any = true;
    absl::StatusOr<ReceivedFrame> frame = ReceivedFrame::ParsePull(buffer);
    if (!frame.ok()) {
      return absl::DataLossError(absl::StrCat(shard, ": ", frame.status().message()));
    }
    if (covered == 0) {
      reply->global_step = frame->pull_head().global_step;
      reply->incarnation = frame->pull_head().incarnation;
      reply->finished = frame->pull_head().finished;
    }
    const int64_t off = frame->offset() - offset;
    const int64_t len = frame->length();
    if (off != covered || len < 0 || covered + len > want) {
      return absl::DataLossError(absl::StrCat(shard, " sent chunk at ", off + offset,
                                              " out of order or beyond the range"));
    }
    if (absl::Status s = frame->DecodeInto(
            out.subspan(static_cast<size_t>(off), static_cast<size_t>(len)), /*nonfinite=*/nullptr);
        !s.ok()) {
      return s;
    }
    covered += len;
  }
  if (covered != want) {
    return absl::DataLossError(absl::StrCat(shard, " sent ", covered, " of ", want, " parameters"));
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::ps
