#include "runtime/train/pod_devices.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/nn/model_spec.h"
#include "runtime/tensor/device.h"

namespace kubetrain::train {

PodReplicas PodDevices::replicas() {
  PodReplicas p;
  for (const std::unique_ptr<nn::Model>& m : models) p.models.push_back(m.get());
  p.reducer = reducer.get();
  return p;
}

absl::StatusOr<PodDevices> OpenPodDevices(const TrainCommandOptions& o,
                                          ProgressReporter& progress) {
  auto config_error = [&](const absl::Status& s) {
    return absl::FailedPreconditionError(absl::StrCat("--device ", o.device, ": ", s.message()));
  };
  absl::StatusOr<std::vector<DeviceInfo>> infos = SelectDevices(o.device, o.gpus, o.cpu_replicas);
  if (!infos.ok()) return config_error(infos.status());
  PodDevices pod;
  for (const DeviceInfo& info : *infos) {
    absl::StatusOr<std::unique_ptr<ComputeDevice>> device =
        OpenComputeDevice(info, {.allow_tf32 = o.tf32});
    if (!device.ok()) return config_error(device.status());
    std::string line = absl::StrCat("device ", info.Id(), " (", info.name, ")");
    if (info.kind == DeviceKind::kCuda) {
      absl::StrAppend(&line, " memory_mib=", info.memory_bytes >> 20,
                      " tf32=", o.tf32 ? "on" : "off");
    }
    progress.Info(line);
    pod.devices.push_back(*std::move(device));
  }
  return pod;
}

absl::Status BuildPodModels(const TrainCommandOptions& o, const Shape& sample_shape,
                            PodDevices& pod, ProgressReporter& progress) {
  std::vector<ComputeDevice*> devices;
  for (const std::unique_ptr<ComputeDevice>& d : pod.devices) {
    absl::StatusOr<std::unique_ptr<nn::Model>> model =
        nn::LoadModel(o.model, sample_shape, d.get());
    if (!model.ok()) return model.status();
    pod.models.push_back(*std::move(model));
    devices.push_back(d.get());
  }
  if (devices.size() < 2) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<exchange::ReplicaReducer>> reducer =
      exchange::OpenReplicaReducer(devices);
  if (!reducer.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot reduce across the pod's ",
                                                      devices.size(),
                                                      " replicas: ", reducer.status().message()));
  }
  pod.reducer = *std::move(reducer);
  std::vector<std::string> ids;
  for (ComputeDevice* d : devices) ids.push_back(d->info().Id());
  progress.Info(absl::StrCat(
      "pod replicas=", devices.size(), " devices=", absl::StrJoin(ids, ","),
      " batch=", o.trainer.batch_size, " split=",
      absl::StrJoin(SplitBatch(o.trainer.batch_size, static_cast<int>(devices.size())), "+"),
      " reducer=", pod.reducer->name(), " (one exchange per step)"));
  return absl::OkStatus();
}

}  // namespace kubetrain::train
