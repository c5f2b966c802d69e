#include "runtime/exchange/ps/ps_refusal.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "kubetrain/v1/parameter_server.pb.h"

namespace kubetrain::ps {

absl::Status WithPsRefusal(absl::Status s, PsRefusal r) {
  if (s.ok()) return s;
  if (r == PsRefusal::kNone) {
    s.ErasePayload(kPsRefusalTypeUrl);
    return s;
  }
  v1::PsRefusalDetail detail;
  detail.set_refusal(static_cast<v1::PsRefusal>(r));
  s.SetPayload(kPsRefusalTypeUrl, absl::Cord(detail.SerializeAsString()));
  return s;
}

PsRefusal PsRefusalOf(const absl::Status& s) {
  const auto payload = s.GetPayload(kPsRefusalTypeUrl);
  if (!payload.has_value()) return PsRefusal::kNone;
  v1::PsRefusalDetail detail;
  if (!detail.ParseFromString(std::string(*payload))) return PsRefusal::kNone;
  const int r = detail.refusal();
  return r > 0 && r <= kMaxPsRefusal ? static_cast<PsRefusal>(r) : PsRefusal::kNone;
}

absl::Status StaleIncarnationError(uint64_t incarnation, uint64_t caller) {
  return WithPsRefusal(absl::FailedPreconditionError(
                           absl::StrCat("parameter server restarted (incarnation ", incarnation,
                                        ", caller has ", caller, "); re-register")),
                       PsRefusal::kStaleIncarnation);
}

}  // namespace kubetrain::ps
