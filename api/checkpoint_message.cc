#include "api/checkpoint_message.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kubetrain::api {

std::string FormatCheckpointMessage(const CheckpointMessage& m) {
  return absl::StrCat(kCheckpointMessagePrefix, m.step, " path=", m.path);
}

std::optional<CheckpointMessage> ParseCheckpointMessage(std::string_view message) {
  std::optional<CheckpointMessage> found;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(message.data(), message.size()), absl::ByAnyChar("\r\n"))) {
    if (!absl::ConsumePrefix(&line, kCheckpointMessagePrefix)) continue;
    const size_t space = line.find(' ');
    if (space == absl::string_view::npos) continue;
    absl::string_view step_text = line.substr(0, space);
    absl::string_view rest = line.substr(space + 1);
    if (!absl::ConsumePrefix(&rest, "path=") || rest.empty()) continue;
    int64_t step = 0;
    if (!absl::SimpleAtoi(step_text, &step) || step < 0) continue;
    found = CheckpointMessage{step, std::string(rest)};
  }
  return found;
}

}  // namespace kubetrain::api
