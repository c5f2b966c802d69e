#include "runtime/nn/model_spec.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/dense.h"
#include "runtime/nn/dropout.h"
#include "runtime/nn/max_pool2d.h"

namespace kubetrain::nn {
namespace {

// The published Fashion-MNIST MLP baseline shape (784-256-128-10).
constexpr char kMlp[] = R"(
input: [28, 28, 1]
layers:
  - flatten
  - {type: dense, units: 256}
  - relu
  - {type: dense, units: 128}
  - relu
  - {type: dense, units: 10}
)";

// Two 3x3 conv blocks with 2x2 max pooling, then a dense head.
constexpr char kCnn[] = R"(
input: [28, 28, 1]
layers:
  - {type: conv2d, filters: 32, kernel: 3, padding: same}
  - relu
  - {type: maxpool2d, size: 2}
  - {type: conv2d, filters: 64, kernel: 3, padding: same}
  - relu
  - {type: maxpool2d, size: 2}
  - flatten
  - {type: dense, units: 128}
  - relu
  - {type: dropout, rate: 0.25}
  - {type: dense, units: 10}
)";

const std::map<std::string, const char*>& Builtins() {
  static const auto* m = new std::map<std::string, const char*>{{"mlp", kMlp}, {"cnn", kCnn}};
  return *m;
}

// Reads the fields of one layer entry, tracking which were used so unknown
// ones are reported rather than silently ignored.
class Fields {
 public:
  explicit Fields(const YAML::Node& node) : node_(node) {}

  absl::StatusOr<int64_t> Int(const std::string& key, std::optional<int64_t> def) {
    used_.insert(key);
    if (!node_.IsMap() || !node_[key]) {
      if (def) return *def;
      return absl::InvalidArgumentError(absl::StrCat("missing required field '", key, "'"));
    }
    try {
      return node_[key].as<int64_t>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", key, "' must be an integer, got '", Scalar(key), "'"));
    }
  }

  absl::StatusOr<double> Float(const std::string& key, double def) {
    used_.insert(key);
    if (!node_.IsMap() || !node_[key]) return def;
    try {
      return node_[key].as<double>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", key, "' must be a number, got '", Scalar(key), "'"));
    }
  }

  // "same", "valid" or an integer; -1 encodes "same".
  absl::StatusOr<int64_t> Padding() {
    used_.insert("padding");
    if (!node_.IsMap() || !node_["padding"]) return -1;
    const std::string s = Scalar("padding");
    if (s == "same") return -1;
    if (s == "valid") return 0;
    try {
      int64_t p = node_["padding"].as<int64_t>();
      if (p >= 0) return p;
    } catch (const YAML::Exception&) {
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "field 'padding' must be 'same', 'valid' or a non-negative integer, got '", s, "'"));
  }

  absl::Status CheckNoUnknown() const {
    if (!node_.IsMap()) return absl::OkStatus();
    for (const auto& kv : node_) {
      const std::string key = kv.first.as<std::string>();
      if (key != "type" && !used_.contains(key)) {
        return absl::InvalidArgumentError(absl::StrCat("unknown field '", key, "'"));
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string Scalar(const std::string& key) const {
    const YAML::Node v = node_[key];
    if (v.IsScalar()) return v.Scalar();
    std::ostringstream os;
    os << v;
    return os.str();
  }

  YAML::Node node_;
  std::set<std::string> used_;
};

absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const std::string& type, Fields& f) {
  if (type == "dense") {
    absl::StatusOr<int64_t> units = f.Int("units", std::nullopt);
    if (!units.ok()) return units.status();
    return std::make_unique<Dense>(*units);
  }
  if (type == "conv2d") {
    Conv2DOptions o;
    absl::StatusOr<int64_t> filters = f.Int("filters", std::nullopt);
    if (!filters.ok()) return filters.status();
    absl::StatusOr<int64_t> kernel = f.Int("kernel", 3);
    if (!kernel.ok()) return kernel.status();
    absl::StatusOr<int64_t> stride = f.Int("stride", 1);
    if (!stride.ok()) return stride.status();
    absl::StatusOr<int64_t> padding = f.Padding();
    if (!padding.ok()) return padding.status();
    o.filters = *filters;
    o.kernel = *kernel;
    o.stride = *stride;
    o.padding = *padding;
    return std::make_unique<Conv2D>(o);
  }
  if (type == "maxpool2d") {
    absl::StatusOr<int64_t> size = f.Int("size", 2);
    if (!size.ok()) return size.status();
    absl::StatusOr<int64_t> stride = f.Int("stride", 0);
    if (!stride.ok()) return stride.status();
    return std::make_unique<MaxPool2D>(*size, *stride);
  }
  if (type == "relu") return std::make_unique<ReLU>();
  if (type == "flatten") return std::make_unique<Flatten>();
  if (type == "dropout") {
    absl::StatusOr<double> rate = f.Float("rate", 0.5);
    if (!rate.ok()) return rate.status();
    return std::make_unique<Dropout>(static_cast<float>(*rate));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown layer type '", type, "' (known: conv2d, dense, dropout, flatten, maxpool2d, relu)"));
}

absl::StatusOr<std::unique_ptr<Model>> Build(const YAML::Node& root,
                                             const std::optional<Shape>& data_shape,
                                             ComputeDevice* device) {
  if (!root.IsMap()) return absl::InvalidArgumentError("expected a mapping with 'layers'");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "input" && key != "layers" && key != "name") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown top-level field '", key, "' (known: name, input, layers)"));
    }
  }
  std::optional<Shape> input;
  if (root["input"]) {
    try {
      input = root["input"].as<std::vector<int64_t>>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError("'input' must be a list of integers, e.g. [28, 28, 1]");
    }
    if (data_shape && NumElements(*input) != NumElements(*data_shape)) {
      return absl::InvalidArgumentError(absl::StrCat("model input ", ShapeToString(*input),
                                                     " does not match the data's sample shape ",
                                                     ShapeToString(*data_shape)));
    }
  } else if (data_shape) {
    input = data_shape;
  } else {
    return absl::InvalidArgumentError("model has no 'input' and no data shape was given");
  }
  const YAML::Node list = root["layers"];
  if (!list || !list.IsSequence() || list.size() == 0) {
    return absl::InvalidArgumentError("'layers' must be a non-empty list");
  }
  std::vector<std::unique_ptr<Layer>> layers;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    std::string type;
    if (item.IsScalar()) {
      type = item.Scalar();
    } else if (item.IsMap() && item["type"] && item["type"].IsScalar()) {
      type = item["type"].Scalar();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "]: expected a layer name or a mapping with 'type'"));
    }
    Fields fields(item);
    absl::StatusOr<std::unique_ptr<Layer>> layer = MakeLayer(type, fields);
    absl::Status s = layer.ok() ? fields.CheckNoUnknown() : layer.status();
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "] (", type, "): ", s.message()));
    }
    layers.push_back(*std::move(layer));
  }
  return Model::Create(std::move(layers), *input, device);
}

}  // namespace

std::vector<std::string> BuiltinModelNames() {
  std::vector<std::string> names;
  for (const auto& [name, _] : Builtins()) names.push_back(name);
  return names;
}

absl::StatusOr<std::string> BuiltinModelSpec(const std::string& name) {
  auto it = Builtins().find(name);
  if (it == Builtins().end()) {
    return absl::NotFoundError(absl::StrCat("no built-in model '", name, "'"));
  }
  return std::string(it->second);
}

absl::StatusOr<std::unique_ptr<Model>> BuildModelFromSpec(const std::string& text,
                                                          const std::string& source,
                                                          const std::optional<Shape>& data_shape,
                                                          ComputeDevice* device) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed YAML/JSON at line ",
                                                   e.mark.line + 1, ", column ", e.mark.column + 1,
                                                   ": ", e.msg));
  }
  absl::StatusOr<std::unique_ptr<Model>> model;
  try {
    model = Build(root, data_shape, device);
  } catch (const YAML::Exception& e) {
    model = absl::InvalidArgumentError(e.what());
  } catch (const std::exception& e) {  // bad_alloc: no exception leaves LoadModel
    model = absl::ResourceExhaustedError(absl::StrCat("cannot build the model: ", e.what()));
  }
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat(source, ": ", model.status().message()));
  }
  return model;
}

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& name_or_path,
                                                 const std::optional<Shape>& data_shape,
                                                 ComputeDevice* device) {
  absl::StatusOr<std::string> builtin = BuiltinModelSpec(name_or_path);
  if (builtin.ok()) {
    return BuildModelFromSpec(*builtin, "builtin:" + name_or_path, data_shape, device);
  }
  std::ifstream in(name_or_path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("model '", name_or_path, "' is neither a built-in (",
                                            absl::StrJoin(BuiltinModelNames(), ", "),
                                            ") nor a readable file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return BuildModelFromSpec(ss.str(), name_or_path, data_shape, device);
}

}  // namespace kubetrain::nn
