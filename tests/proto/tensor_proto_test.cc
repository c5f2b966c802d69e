// The generated wire types link and carry raw float bytes unchanged.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kubetrain/v1/tensor.pb.h"

namespace kubetrain {
namespace {

TEST(TensorProto, ChunkRoundTripsRawFloats) {
  std::vector<float> values = {1.5f, -2.25f, 3.0e-8f, 65504.0f};
  v1::TensorChunk chunk;
  chunk.mutable_range()->set_offset(1024);
  chunk.mutable_range()->set_length(values.size());
  chunk.set_dtype(v1::WIRE_DTYPE_F32);
  chunk.set_data(values.data(), values.size() * sizeof(float));
  std::string wire;
  ASSERT_TRUE(chunk.SerializeToString(&wire));

  v1::TensorChunk back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.range().offset(), 1024u);
  EXPECT_EQ(back.dtype(), v1::WIRE_DTYPE_F32);
  ASSERT_EQ(back.data().size(), values.size() * sizeof(float));
  std::vector<float> out(values.size());
  std::memcpy(out.data(), back.data().data(), back.data().size());
  EXPECT_EQ(out, values);
  // A truncated message does not parse as the same chunk.
  v1::TensorChunk cut;
  EXPECT_FALSE(cut.ParseFromString(wire.substr(0, wire.size() - 3)));
}

}  // namespace
}  // namespace kubetrain
