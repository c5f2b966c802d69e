#include "runtime/nn/model_spec.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kubetrain::nn {
namespace {

using ::testing::HasSubstr;

absl::Status BuildError(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Model>> m =
      BuildModelFromSpec(text, "model.yaml", Shape{28, 28, 1});
  return m.ok() ? absl::OkStatus() : m.status();
}

TEST(ModelSpec, YamlAndJsonGiveTheSameModel) {
  auto yaml =
      BuildModelFromSpec("layers: [flatten, {type: dense, units: 10}]", "a.yaml", Shape{28, 28, 1});
  auto json = BuildModelFromSpec(R"({"layers": ["flatten", {"type": "dense", "units": 10}]})",
                                 "a.json", Shape{28, 28, 1});
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*yaml)->num_params(), (*json)->num_params());
  EXPECT_EQ((*yaml)->num_params(), 784 * 10 + 10);
}

TEST(ModelSpec, UnknownLayerNamesItsIndex) {
  absl::Status s = BuildError("layers: [flatten, {type: densee, units: 10}]");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("model.yaml: layers[1] (densee): unknown layer type"));
}

TEST(ModelSpec, ShapeMismatchIsExplained) {
  absl::Status s = BuildError("layers: [{type: dense, units: 10}]");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("layers[0] (dense): expects a flat input, got [28, 28, 1]"));
  s = BuildError("layers: [flatten, {type: conv2d, filters: 4}]");
  EXPECT_THAT(std::string(s.message()), HasSubstr("layers[1] (conv2d): expects an image input"));
  s = BuildError("layers: [{type: maxpool2d, size: 40}]");
  EXPECT_THAT(std::string(s.message()), HasSubstr("larger than the input"));
  s = BuildError("input: [10, 10, 1]\nlayers: [flatten]");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("does not match the data's sample shape [28, 28, 1]"));
}

TEST(ModelSpec, BadFieldsAreRefused) {
  EXPECT_THAT(std::string(BuildError("layers: [flatten, {type: dense, unit: 10}]").message()),
              HasSubstr("missing required field 'units'"));
  EXPECT_THAT(
      std::string(BuildError("layers: [flatten, {type: dense, units: 10, act: relu}]").message()),
      HasSubstr("unknown field 'act'"));
  EXPECT_THAT(std::string(BuildError("layers: [flatten, {type: dense, units: ten}]").message()),
              HasSubstr("'units' must be an integer"));
  EXPECT_THAT(std::string(BuildError("layers: [{type: dropout, rate: 1.5}]").message()),
              HasSubstr("rate must be in [0, 1)"));
  EXPECT_THAT(std::string(BuildError("layerz: []").message()),
              HasSubstr("unknown top-level field 'layerz'"));
  EXPECT_THAT(std::string(BuildError("layers: []").message()), HasSubstr("non-empty list"));
}

// A model that cannot fit is refused with its numbers before any memory is
// taken (it used to throw bad_alloc out of LoadModel).
TEST(ModelSpec, ModelsTooLargeToFitAreRefused) {
  EXPECT_THAT(
      std::string(BuildError("layers: [flatten, {type: dense, units: 1000000000000}]").message()),
      HasSubstr("layers[1] (dense): output shape [1000000000000] has more than 2^28 values"));
  EXPECT_THAT(std::string(BuildError("layers: [flatten, {type: dense, units: 200000000}, "
                                     "{type: dense, units: 10}]")
                              .message()),
              HasSubstr("layers[1] (dense): the model would have 157000000000 parameters"));
}

TEST(ModelSpec, MalformedTextNamesTheLine) {
  absl::Status s = BuildError("layers:\n  - {type: dense, units: [1, 2\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.yaml: malformed YAML/JSON at line"));
}

TEST(ModelSpec, LoadModelFromFileAndMissingFile) {
  const std::string path = testing::TempDir() + "/model_spec_test.json";
  std::ofstream(path) << R"({"layers": ["flatten", {"type": "dense", "units": 10}]})";
  auto m = LoadModel(path, Shape{28, 28, 1});
  ASSERT_TRUE(m.ok()) << m.status();
  auto missing = LoadModel("/nonexistent/model.yaml", Shape{28, 28, 1});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("neither a built-in (cnn, mlp)"));
}

}  // namespace
}  // namespace kubetrain::nn
