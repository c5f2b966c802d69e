// Ports and endpoints the operator and the runtime agree on (docs/design.md,
// "Contracts between operator and runtime"). Constants only; thread-safe.
#ifndef KUBETRAIN_API_PORTS_H_
#define KUBETRAIN_API_PORTS_H_

namespace kubetrain::api {

// Where the runtime's servers (the parameter server, the allreduce
// rendezvous) listen unless told otherwise: every address, on the default
// kubetrain-port (training_job.h's kDefaultPort; ports_test checks they agree).
inline constexpr char kDefaultListenAddress[] = "0.0.0.0:2222";

// The runtime serves Prometheus metrics here unless $KUBETRAIN_METRICS_PORT
// says otherwise; the operator's pods declare it and its progress poller
// scrapes it when a pod has no prometheus.io/port annotation.
inline constexpr int kMetricsPort = 8090;
inline constexpr char kMetricsPortString[] = "8090";
inline constexpr char kMetricsPath[] = "/metrics";
// The name of the metrics port on the first container (IANA_SVC_NAME: at most
// 15 characters). Not "metrics", which a sidecar may well use; a PodMonitor
// selects it by name.
inline constexpr char kMetricsPortName[] = "kt-metrics";

// Prometheus scrape annotations on every replica pod.
inline constexpr char kPrometheusScrapeAnnotation[] = "prometheus.io/scrape";
inline constexpr char kPrometheusPortAnnotation[] = "prometheus.io/port";
inline constexpr char kPrometheusPathAnnotation[] = "prometheus.io/path";

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_PORTS_H_
