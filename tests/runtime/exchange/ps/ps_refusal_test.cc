// PsRefusal as an absl::Status payload, and across gRPC's status conversion:
// the refusal is a typed value that survives the trip whatever the message
// says, and details that are not ours are dropped.
#include "runtime/exchange/ps/ps_refusal.h"

#include <grpcpp/grpcpp.h>

#include <string>

#include "gtest/gtest.h"
#include "kubetrain/v1/parameter_server.pb.h"
#include "kubetrain/v1/status.pb.h"
#include "runtime/exchange/grpc_util.h"

namespace kubetrain::ps {
namespace {

TEST(PsRefusal, RoundTripsAsAStatusPayload) {
  for (PsRefusal r : {PsRefusal::kStaleIncarnation, PsRefusal::kUninitialised}) {
    const absl::Status s = WithPsRefusal(absl::FailedPreconditionError("anything at all"), r);
    EXPECT_EQ(PsRefusalOf(s), r);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(), "anything at all");
    EXPECT_TRUE(s.GetPayload(kPsRefusalTypeUrl).has_value());
  }
}

TEST(PsRefusal, IsNoneWithoutAPayloadWhateverTheMessageSays) {
  EXPECT_EQ(PsRefusalOf(absl::OkStatus()), PsRefusal::kNone);
  EXPECT_EQ(PsRefusalOf(absl::FailedPreconditionError(
                "parameter server restarted (incarnation 2, caller has 1); re-register")),
            PsRefusal::kNone);
  EXPECT_EQ(PsRefusalOf(absl::FailedPreconditionError("not initialised")), PsRefusal::kNone);
}

TEST(PsRefusal, NoneRemovesItAndOkStaysOk) {
  absl::Status s = WithPsRefusal(absl::UnavailableError("x"), PsRefusal::kUninitialised);
  s = WithPsRefusal(s, PsRefusal::kNone);
  EXPECT_EQ(PsRefusalOf(s), PsRefusal::kNone);
  EXPECT_FALSE(s.GetPayload(kPsRefusalTypeUrl).has_value());
  EXPECT_TRUE(WithPsRefusal(absl::OkStatus(), PsRefusal::kStaleIncarnation).ok());
}

TEST(PsRefusal, GarbageOrUnknownPayloadsReadAsNone) {
  absl::Status s = absl::FailedPreconditionError("x");
  s.SetPayload(kPsRefusalTypeUrl, absl::Cord("\xff\xff\xff"));
  EXPECT_EQ(PsRefusalOf(s), PsRefusal::kNone);
  v1::PsRefusalDetail future;
  future.set_refusal(static_cast<v1::PsRefusal>(77));
  s.SetPayload(kPsRefusalTypeUrl, absl::Cord(future.SerializeAsString()));
  EXPECT_EQ(PsRefusalOf(s), PsRefusal::kNone);
}

TEST(PsRefusal, StaleIncarnationErrorIsTypedAndSaysWhy) {
  const absl::Status s = StaleIncarnationError(8, 7);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(s), PsRefusal::kStaleIncarnation);
  EXPECT_EQ(s.message(), "parameter server restarted (incarnation 8, caller has 7); re-register");
}

TEST(PsRefusalOverGrpc, TravelsAsATypedDetailAndComesBackAsThePayload) {
  const absl::Status sent = WithPsRefusal(absl::FailedPreconditionError("reworded for people"),
                                          PsRefusal::kUninitialised);
  const grpc::Status wire = exchange::ToGrpc(sent);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(wire.error_message(), "reworded for people");
  // On the wire: a StatusDetails (google.rpc.Status layout) whose Any is a
  // PsRefusalDetail, readable by any client with the proto.
  v1::StatusDetails details;
  ASSERT_TRUE(details.ParseFromString(wire.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  ASSERT_EQ(details.details_size(), 1);
  EXPECT_EQ(details.details(0).type_url(), kPsRefusalTypeUrl);
  v1::PsRefusalDetail detail;
  ASSERT_TRUE(detail.ParseFromString(details.details(0).value()));
  EXPECT_EQ(detail.refusal(), v1::PS_REFUSAL_UNINITIALISED);

  const absl::Status back = exchange::FromGrpc(wire);
  EXPECT_EQ(back.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(back.message(), "reworded for people");
  EXPECT_EQ(PsRefusalOf(back), PsRefusal::kUninitialised);
}

TEST(PsRefusalOverGrpc, PlainStatusesHaveNoDetailsAndForeignDetailsAreDropped) {
  EXPECT_TRUE(exchange::ToGrpc(absl::UnavailableError("gone")).error_details().empty());
  const absl::Status back = exchange::FromGrpc(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "re-register", "\xff\x01not a proto"));
  EXPECT_EQ(back.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(back), PsRefusal::kNone);
}

}  // namespace
}  // namespace kubetrain::ps
