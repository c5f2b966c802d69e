// The hand-written tensor frames against protobuf's own encoding of the same
// messages (both directions, any slicing of the received bytes), and every
// way a frame can be wrong.
#include "runtime/exchange/ps/grpc_frame.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/ps/wire_values.h"
#include "tests/support/tensor_chunk_codec.h"

namespace kubetrain::ps {
namespace {

using ::testing::HasSubstr;

std::string Bytes(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `bytes` cut into slices of `piece` bytes, as the transport may deliver it.
grpc::ByteBuffer Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t off = 0; off < bytes.size(); off += piece) {
    slices.emplace_back(bytes.data() + off, std::min(piece, bytes.size() - off));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.1f * static_cast<float>(i)) * 4.0f;
  return v;
}

v1::PushHeader Header() {
  v1::PushHeader h;
  h.set_worker(3);
  h.set_step(41);
  h.set_incarnation(0x1234567890abULL);
  h.set_total_steps(1000);
  return h;
}

TEST(ChunkFrame, PushFramesAreProtobufsPushMessage) {
  const std::vector<float> v = Ramp(1000);
  for (v1::WireDType dtype : {v1::WIRE_DTYPE_F32, v1::WIRE_DTYPE_F16}) {
    const v1::PushHeader h = Header();
    const std::string mine = Bytes(EncodePushFrame(&h, v, 70000, dtype));
    v1::PushMessage want;
    *want.mutable_header() = h;
    EncodeChunk(v, 70000, dtype, want.mutable_chunk());
    ASSERT_NE(want.chunk().crc32c(), 0u);  // protobuf writes it, so bytes match
    EXPECT_EQ(mine, want.SerializeAsString()) << dtype;
    v1::PushMessage parsed;
    ASSERT_TRUE(parsed.ParseFromString(mine));
    std::vector<float> out(v.size());
    ASSERT_TRUE(DecodeChunk(parsed.chunk(), out).ok());
    if (dtype == v1::WIRE_DTYPE_F32) {
      EXPECT_EQ(out, v);
    }
  }
  // Later messages of a stream carry no header.
  const std::string rest = Bytes(EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32));
  v1::PushMessage want;
  EncodeChunk(v, 0, v1::WIRE_DTYPE_F32, want.mutable_chunk());
  EXPECT_EQ(rest, want.SerializeAsString());
}

TEST(ChunkFrame, PullFramesAreProtobufsPullMessage) {
  const std::vector<float> v = Ramp(513);
  const PullFrameHead head{12345, 77, true};
  const std::string mine = Bytes(EncodePullFrame(&head, v, 9, v1::WIRE_DTYPE_F32));
  v1::PullMessage want;
  want.set_global_step(12345);
  want.set_incarnation(77);
  want.set_finished(true);
  EncodeChunk(v, 9, v1::WIRE_DTYPE_F32, want.mutable_chunk());
  EXPECT_EQ(mine, want.SerializeAsString());
}

TEST(ChunkFrame, ReadsProtobufEncodedFramesHoweverTheyAreSliced) {
  const std::vector<float> v = Ramp(4099);
  v1::PushMessage m;
  *m.mutable_header() = Header();
  EncodeChunk(v, 128, v1::WIRE_DTYPE_F32, m.mutable_chunk());
  const std::string wire = m.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, wire.size()}) {
    absl::StatusOr<ReceivedFrame> f = ReceivedFrame::ParsePush(Sliced(wire, piece));
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->header().has_value());
    EXPECT_EQ(f->header()->step(), 41);
    EXPECT_EQ(f->header()->incarnation(), 0x1234567890abULL);
    EXPECT_EQ(f->offset(), 128);
    EXPECT_EQ(f->length(), 4099);
    std::vector<float> out(v.size());
    int64_t bad = 0;
    ASSERT_TRUE(f->DecodeInto(out, &bad).ok()) << piece;
    EXPECT_EQ(out, v) << piece;
    EXPECT_EQ(bad, 0);
  }
  // fp16, as an fp16 worker sends it.
  EncodeChunk(v, 128, v1::WIRE_DTYPE_F16, m.mutable_chunk());
  absl::StatusOr<ReceivedFrame> f = ReceivedFrame::ParsePush(Sliced(m.SerializeAsString(), 5));
  ASSERT_TRUE(f.ok());
  std::vector<float> out(v.size());
  ASSERT_TRUE(f->DecodeInto(out, nullptr).ok());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(out[i], v[i], 4.0 * 0x1.0p-11) << i;
}

TEST(ChunkFrame, AcceptsAnyFieldOrderAndSkipsUnknownFields) {
  const std::vector<float> v = Ramp(64);
  v1::TensorChunk c;
  EncodeChunk(v, 5, v1::WIRE_DTYPE_F32, &c);
  // crc32c first, then data, dtype, an unknown varint (field 9) and range.
  std::string chunk;
  auto put = [&](const std::string& s) { chunk += s; };
  const uint32_t crc = c.crc32c();
  put(std::string("\x25", 1) + std::string(reinterpret_cast<const char*>(&crc), 4));
  put("\x1a");
  put(std::string(1, static_cast<char>(0x80 | (c.data().size() & 0x7f))) +
      std::string(1, static_cast<char>(c.data().size() >> 7)));
  put(c.data());
  put("\x10\x01");                                  // dtype F32
  put("\x48\x05");                                  // field 9, varint 5: unknown
  put(std::string("\x0a\x04\x08\x05\x10\x40", 6));  // range {5, 64}
  std::string msg = "\x12";
  msg += static_cast<char>(0x80 | (chunk.size() & 0x7f));
  msg += static_cast<char>(chunk.size() >> 7);
  msg += chunk;
  absl::StatusOr<ReceivedFrame> f = ReceivedFrame::ParsePush(Sliced(msg, 11));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->header().has_value());
  EXPECT_EQ(f->offset(), 5);
  std::vector<float> out(v.size());
  ASSERT_TRUE(f->DecodeInto(out, nullptr).ok());
  EXPECT_EQ(out, v);
}

TEST(ChunkFrame, CorruptWrongSizedAndNonFiniteChunksAreCaught) {
  std::vector<float> v = Ramp(300);
  std::string wire = Bytes(EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32));
  wire[wire.size() / 2] ^= 0x10;  // a bit flips in the data
  absl::StatusOr<ReceivedFrame> f = ReceivedFrame::ParsePush(Sliced(wire, 100));
  ASSERT_TRUE(f.ok());
  std::vector<float> out(v.size());
  absl::Status s = f->DecodeInto(out, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("chunk at offset 0 failed its checksum"));

  f = ReceivedFrame::ParsePush(EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32));
  std::vector<float> small(299);
  s = f->DecodeInto(small, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("has 1200 bytes, expected 1196"));

  v[7] = std::nanf("");
  v[200] = -INFINITY;
  f = ReceivedFrame::ParsePush(EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32));
  int64_t bad = 0;
  ASSERT_TRUE(f->DecodeInto(out, &bad).ok());
  EXPECT_EQ(bad, 2);
}

TEST(ChunkFrame, MalformedFramesAreRefused) {
  const std::vector<float> v = Ramp(40);
  const std::string wire = Bytes(EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32));
  for (size_t cut : {size_t{1}, size_t{3}, wire.size() / 2, wire.size() - 1}) {
    absl::StatusOr<ReceivedFrame> f = ReceivedFrame::ParsePush(Sliced(wire.substr(0, cut), 8));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("malformed push frame")) << cut;
  }
  absl::StatusOr<ReceivedFrame> twice = ReceivedFrame::ParsePush(Sliced(wire + wire, 64));
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("more than one chunk"));
  absl::StatusOr<ReceivedFrame> group = ReceivedFrame::ParsePush(Sliced("\x0b", 1));
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FramePool, BuffersComeBackWhenTheirSlicesGo) {
  const std::vector<float> v = Ramp(kChunkElements);
  FramePool pool(2);
  {
    grpc::ByteBuffer a = EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32, &pool);
    grpc::ByteBuffer b = a;  // gRPC holding a second reference
    EXPECT_EQ(pool.idle_buffers(), 0u);
    a.Clear();
    EXPECT_EQ(pool.idle_buffers(), 0u);
    absl::StatusOr<ReceivedFrame> f = ReceivedFrame::ParsePush(b);
    ASSERT_TRUE(f.ok());
    std::vector<float> out(v.size());
    ASSERT_TRUE(f->DecodeInto(out, nullptr).ok());
    EXPECT_EQ(out, v);
  }
  EXPECT_EQ(pool.idle_buffers(), 1u);
  {
    grpc::ByteBuffer a = EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32, &pool);
    EXPECT_EQ(pool.idle_buffers(), 0u);  // the idle one was reused
    grpc::ByteBuffer b = EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32, &pool);
    grpc::ByteBuffer c = EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32, &pool);
  }
  EXPECT_EQ(pool.idle_buffers(), 2u);  // at most max_free kept
  // A slice may outlive its pool.
  grpc::ByteBuffer survivor;
  {
    FramePool gone(4);
    survivor = EncodePushFrame(nullptr, v, 0, v1::WIRE_DTYPE_F32, &gone);
  }
  absl::StatusOr<ReceivedFrame> f = ReceivedFrame::ParsePush(survivor);
  ASSERT_TRUE(f.ok());
  std::vector<float> out(v.size());
  EXPECT_TRUE(f->DecodeInto(out, nullptr).ok());
}

}  // namespace
}  // namespace kubetrain::ps
