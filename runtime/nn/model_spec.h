// Model descriptions: a list of layers in YAML or JSON (JSON is read as
// YAML), plus the built-in models `mlp` and `cnn` written in the same form.
//
//   input: [28, 28, 1]          # optional; defaults to the data's shape
//   layers:
//     - {type: conv2d, filters: 32, kernel: 3, padding: same}
//     - relu
//     - {type: maxpool2d, size: 2}
//     - flatten
//     - {type: dense, units: 10}
//
// Functions are stateless and thread-safe.
#ifndef KUBETRAIN_RUNTIME_NN_MODEL_SPEC_H_
#define KUBETRAIN_RUNTIME_NN_MODEL_SPEC_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/nn/model.h"

namespace kubetrain::nn {

// Names of the built-in models.
std::vector<std::string> BuiltinModelNames();

// The YAML text of a built-in model, or NotFound.
absl::StatusOr<std::string> BuiltinModelSpec(const std::string& name);

// Builds a model from spec text. `source` names it in errors (a path or
// "builtin:mlp"). `data_shape` is used when the spec has no `input`; when
// both are given they must agree.
// `device` (borrowed, may be null: the CPU) is where the model computes.
absl::StatusOr<std::unique_ptr<Model>> BuildModelFromSpec(const std::string& text,
                                                          const std::string& source,
                                                          const std::optional<Shape>& data_shape,
                                                          ComputeDevice* device = nullptr);

// `name_or_path` is a built-in name or a .yaml/.yml/.json file.
absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& name_or_path,
                                                 const std::optional<Shape>& data_shape,
                                                 ComputeDevice* device = nullptr);

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_MODEL_SPEC_H_
