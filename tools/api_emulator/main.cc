// kubetrain-api-emulator: the in-process Kubernetes API emulator of the tests
// (testing/kube_emulator.h) as a server of its own, so that
// scripts/local-cluster.sh can start a local cluster without a real control
// plane: kubectl (discovery, apply, get with the CRD's printer columns, wait,
// delete with garbage collection), the operator and the node agent talk to it
// over plain HTTP on 127.0.0.1. State lives in memory and ends with the
// process; SIGTERM or SIGINT stops it.
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/stop_signals.h"
#include "testing/kube_emulator.h"

int main(int argc, char** argv) {
  int port = 0;
  std::string kubeconfig;
  std::vector<std::string> crds;
  CLI::App app{
      "kubetrain-api-emulator: a Kubernetes API server for trying kubetrain on one machine "
      "without a cluster (in memory, plain HTTP on 127.0.0.1, no authentication)."};
  app.add_option("--port", port, "port on 127.0.0.1 (0: any free one)")->capture_default_str();
  app.add_option("--kubeconfig-out", kubeconfig,
                 "write a kubeconfig for this server here (mode 600)")
      ->required();
  app.add_option("--crd", crds,
                 "CustomResourceDefinition manifests (default: the project's TrainingJob and "
                 "Volcano PodGroup CRDs)");
  CLI11_PARSE(app, argc, argv);

  kubetrain::base::StopSignals::Block();  // before any thread starts

  kubetrain::testing::KubeEmulatorOptions options;
  options.port = port;
  options.crd_files = crds;
  options.bookmark_interval = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<kubetrain::testing::KubeEmulator>> emulator =
      kubetrain::testing::KubeEmulator::Start(options);
  if (!emulator.ok()) {
    std::cerr << "kubetrain-api-emulator: " << emulator.status().message() << "\n";
    return 1;
  }
  const std::string url = (*emulator)->Url();
  {
    const std::string tmp = kubeconfig + ".tmp";
    std::ofstream out(tmp);
    out << "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: "
        << url
        << "\nusers:\n- name: local\n  user: {}\ncontexts:\n- name: emulator\n  context: "
           "{cluster: emulator, user: local, namespace: default}\ncurrent-context: emulator\n";
    out.close();
    if (!out || chmod(tmp.c_str(), 0600) != 0 || rename(tmp.c_str(), kubeconfig.c_str()) != 0) {
      std::cerr << "kubetrain-api-emulator: cannot write " << kubeconfig << "\n";
      return 1;
    }
  }
  std::cerr << "kubetrain-api-emulator: serving the Kubernetes API on " << url << " (kubeconfig "
            << kubeconfig << ")" << std::endl;
  int sig = 0;
  while (sig == 0) sig = kubetrain::base::StopSignals::Wait(absl::Hours(1));
  std::cerr << "kubetrain-api-emulator: " << kubetrain::base::StopSignals::Name(sig) << ": stopping"
            << std::endl;
  emulator->reset();
  std::cerr << "kubetrain-api-emulator: stopped" << std::endl;
  return 0;
}
