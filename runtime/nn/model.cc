#include "runtime/nn/model.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "runtime/nn/dropout.h"
#include "runtime/tensor/cpu_device.h"

namespace kubetrain::nn {

absl::StatusOr<std::unique_ptr<Model>> Model::Create(std::vector<std::unique_ptr<Layer>> layers,
                                                     const Shape& input_shape,
                                                     ComputeDevice* device) {
  if (layers.empty()) return absl::InvalidArgumentError("model has no layers");
  if (input_shape.empty() || NumElements(input_shape) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input shape must be non-empty and positive, got ", ShapeToString(input_shape)));
  }
  // A model that cannot fit in memory is refused here with its numbers, not
  // by bad_alloc (or an int64 overflow) later. Bounding every output also
  // bounds each layer's parameter count (inputs x outputs < 2^62).
  constexpr int64_t kMaxElementsPerSample = int64_t{1} << 28;
  constexpr int64_t kMaxParams = int64_t{1} << 30;  // 4 GiB of float32 per copy
  if (NumElements(input_shape) > kMaxElementsPerSample) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input shape ", ShapeToString(input_shape), " is too large"));
  }
  int64_t total_params = 0;
  std::vector<Shape> shapes;
  shapes.push_back(input_shape);
  for (size_t i = 0; i < layers.size(); ++i) {
    absl::StatusOr<Shape> out = layers[i]->Build(shapes.back());
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "] (", layers[i]->kind(), "): ", out.status().message()));
    }
    if (NumElements(*out) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layers[", i, "] (", layers[i]->kind(), "): empty output shape ", ShapeToString(*out)));
    }
    if (NumElements(*out) > kMaxElementsPerSample) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", i, "] (", layers[i]->kind(),
                                                     "): output shape ", ShapeToString(*out),
                                                     " has more than 2^28 values per sample"));
    }
    total_params += layers[i]->NumParams();
    if (total_params > kMaxParams) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", i, "] (", layers[i]->kind(),
                                                     "): the model would have ", total_params,
                                                     " parameters; at most 2^30 are supported"));
    }
    shapes.push_back(*std::move(out));
  }
  std::unique_ptr<Model> model(new Model(std::move(layers), std::move(shapes), device));
  if (absl::Status s = model->Init(); !s.ok()) return s;
  return model;
}

Model::Model(std::vector<std::unique_ptr<Layer>> layers, std::vector<Shape> shapes,
             ComputeDevice* device)
    : own_device_(device == nullptr ? std::make_unique<CpuDevice>() : nullptr),
      device_(device == nullptr ? own_device_.get() : device),
      layers_(std::move(layers)),
      input_shape_(shapes.front()) {
  shapes_.assign(shapes.begin() + 1, shapes.end());
}

absl::Status Model::Init() {
  for (auto& l : layers_) l->SetDevice(device_);
  param_offset_.assign(layers_.size(), -1);
  std::vector<std::pair<size_t, size_t>> first_entry_of;  // (layer, its first flat entry)
  for (size_t i = 0; i < layers_.size(); ++i) {
    const size_t first_entry = flat_.entries().size();
    layers_[i]->DeclareParams(flat_, absl::StrCat("layers.", i, ".", layers_[i]->kind(), "."));
    if (flat_.entries().size() > first_entry) first_entry_of.push_back({i, first_entry});
  }
  if (device_->host_memory()) {
    flat_.Allocate();
  } else if (absl::Status s = flat_.Allocate(*device_); !s.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("the model's ", flat_.size(),
                                                     " parameters do not fit in ",
                                                     device_->info().Id(), ": ", s.message()));
  }
  for (const auto& [layer, entry] : first_entry_of) {
    param_offset_[layer] = flat_.entries()[entry].offset;
  }
  for (auto& l : layers_) l->BindParams(flat_);
  acts_.resize(layers_.size());
  skip_.assign(layers_.size(), false);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string kind = layers_[i]->kind();
    skip_[i] = kind == "flatten" ||
               (kind == "relu" && i > 0 && !skip_[i - 1] && layers_[i - 1]->FuseRelu());
  }
  first_trainable_ = layers_.size();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->NumParams() > 0) {
      first_trainable_ = i;
      break;
    }
  }
  return absl::OkStatus();
}

void Model::InitParams(uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (device_->host_memory()) {
    for (auto& l : layers_) l->InitParams(rng);
    return;
  }
  // Initialisers write host memory: run them on a host copy, then upload.
  std::unique_ptr<FlatParameters> host = flat_.HostCopyOfLayout();
  for (auto& l : layers_) l->BindParams(*host);
  for (auto& l : layers_) l->InitParams(rng);
  device_->CopyToDevice(host->params().data(), flat_.params().data(), host->params().size_bytes());
  for (auto& l : layers_) l->BindParams(flat_);
}

int64_t Model::BatchBytes(int64_t batch) const {
  int64_t floats = NumElements(input_shape_);
  int64_t widest = NumElements(input_shape_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!skip_[i]) floats += NumElements(shapes_[i]);
    widest = std::max(widest, NumElements(shapes_[i]));
  }
  int64_t bytes = batch * (floats + 2 * widest) * static_cast<int64_t>(sizeof(float));
  for (const auto& l : layers_) bytes += l->ScratchBytes(batch);
  return bytes;
}

absl::Status Model::Reserve(int64_t batch) {
  if (batch <= capacity_) return absl::OkStatus();
  if (!device_->host_memory()) {
    const DeviceMemory mem = device_->Memory();
    const int64_t need = BatchBytes(batch) - BatchBytes(capacity_);
    if (mem.total_bytes > 0 && need > mem.free_bytes) {
      constexpr double kMiB = 1 << 20;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "batch %d does not fit in %s: activations and scratch need %.0f MiB, %.0f MiB of %.0f "
          "MiB are free after the model's parameters (%.0f MiB); lower --batch-size (or "
          "--eval-batch-size) or train a smaller model",
          batch, device_->info().Id(), static_cast<double>(need) / kMiB,
          static_cast<double>(mem.free_bytes) / kMiB, static_cast<double>(mem.total_bytes) / kMiB,
          static_cast<double>(2 * num_params() * static_cast<int64_t>(sizeof(float))) / kMiB));
    }
  }
  if (absl::Status s = Allocate(batch); !s.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch ", batch, " does not fit in ", device_->info().Id(), " (", s.message(),
                     "); lower --batch-size (or "
                     "--eval-batch-size) or train a smaller model"));
  }
  return absl::OkStatus();
}

absl::Status Model::Allocate(int64_t batch) {
  auto floats = [&](int64_t n) { return static_cast<size_t>(batch * n) * sizeof(float); };
  if (absl::Status s = EnsureBytes(*device_, input_, floats(NumElements(input_shape_))); !s.ok()) {
    return s;
  }
  int64_t widest = NumElements(input_shape_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!skip_[i]) {
      if (absl::Status s = EnsureBytes(*device_, acts_[i], floats(NumElements(shapes_[i])));
          !s.ok()) {
        return s;
      }
    }
    widest = std::max(widest, NumElements(shapes_[i]));
  }
  if (absl::Status s = EnsureBytes(*device_, grad_a_, floats(widest)); !s.ok()) return s;
  if (absl::Status s = EnsureBytes(*device_, grad_b_, floats(widest)); !s.ok()) return s;
  for (auto& l : layers_) {
    if (absl::Status s = l->Reserve(batch); !s.ok()) return s;
  }
  capacity_ = batch;
  return absl::OkStatus();
}

float* Model::OutputData(size_t i) {
  for (;; --i) {
    if (!skip_[i]) return acts_[i].data();
    if (i == 0) return input_.data();
  }
}

void Model::UseForwardCounter(const uint64_t* calls) {
  for (const std::unique_ptr<Layer>& l : layers_) {
    if (auto* d = dynamic_cast<Dropout*>(l.get())) d->UseCallCounter(calls);
  }
}

void Model::SetForwardCalls(uint64_t calls) {
  for (const std::unique_ptr<Layer>& l : layers_) {
    if (auto* d = dynamic_cast<Dropout*>(l.get())) d->SetCalls(calls);
  }
}

TensorView Model::Forward(const float* inputs, int64_t batch, bool training) {
  device_->CopyToDevice(inputs, InputBuffer(batch),
                        static_cast<size_t>(batch * NumElements(input_shape_)) * sizeof(float));
  return ForwardInput(batch, training);
}

float* Model::InputBuffer(int64_t batch) {
  KT_CHECK_GT(batch, 0);
  if (batch > capacity_) {
    absl::Status s = Reserve(batch);
    KT_CHECK(s.ok()) << s.message();
  }
  return input_.data();
}

TensorView Model::ForwardInput(int64_t batch, bool training) {
  KT_CHECK_GT(batch, 0);
  KT_CHECK_GE(capacity_, batch);
  batch_ = batch;
  TensorView x(input_.data(), WithBatch(batch, input_shape_));
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (skip_[i]) {
      x = x.Reshaped(WithBatch(batch, shapes_[i]));
      continue;
    }
    TensorView y(acts_[i].data(), WithBatch(batch, shapes_[i]));
    layers_[i]->Forward(x, y, training);
    x = y;
  }
  return x;
}

void Model::Backward(const TensorView& grad_logits,
                     const std::function<void(int64_t ready_from)>& on_ready) {
  KT_CHECK_EQ(grad_logits.dim(0), batch_) << "Backward batch differs from Forward";
  TensorView grad_out = grad_logits;
  DeviceBuffer* next = &grad_a_;
  for (size_t i = layers_.size(); i-- > 0;) {
    const Shape in_shape = WithBatch(batch_, i == 0 ? input_shape_ : shapes_[i - 1]);
    if (skip_[i]) {
      grad_out = grad_out.Reshaped(in_shape);
      continue;
    }
    const TensorView in(i == 0 ? input_.data() : OutputData(i - 1), in_shape);
    const TensorView out(acts_[i].data(), WithBatch(batch_, shapes_[i]));
    if (i <= first_trainable_) {
      layers_[i]->Backward(in, out, grad_out, nullptr);
      if (on_ready && param_offset_[i] >= 0) on_ready(param_offset_[i]);
      break;
    }
    TensorView grad_in(next->data(), in.shape());
    layers_[i]->Backward(in, out, grad_out, &grad_in);
    if (on_ready && param_offset_[i] >= 0) on_ready(param_offset_[i]);
    grad_out = grad_in;
    next = next == &grad_a_ ? &grad_b_ : &grad_a_;
  }
}

int64_t Model::TrainFlops(int64_t batch) const {
  int64_t f = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    f += layers_[i]->ForwardFlops(batch) + layers_[i]->BackwardFlops(batch);
    if (i <= first_trainable_) f -= layers_[i]->InputGradFlops(batch);
  }
  return f;
}

std::string Model::Summary() const {
  std::string s;
  Shape in = input_shape_;
  absl::StrAppendFormat(&s, "input %s\n", ShapeToString(in));
  for (size_t i = 0; i < layers_.size(); ++i) {
    absl::StrAppendFormat(&s, "  %-44s -> %-14s params=%d\n", layers_[i]->Describe(),
                          ShapeToString(shapes_[i]), layers_[i]->NumParams());
  }
  absl::StrAppendFormat(&s, "total params=%d", num_params());
  return s;
}

}  // namespace kubetrain::nn
