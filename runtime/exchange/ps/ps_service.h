// PsService: the gRPC face of one PsShard. Decodes gradient chunks
// straight into the worker's staging buffer, checks the job token and the
// shard's incarnation, and streams parameters back in chunks.
// Thread-safe: gRPC calls it from many threads.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SERVICE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SERVICE_H_

#include <mutex>
#include <string>
#include <vector>

#include "kubetrain/v1/parameter_server.grpc.pb.h"
#include "runtime/exchange/grpc_util.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/tensor/aligned_buffer.h"

namespace kubetrain::ps {

class PsService final : public v1::ParameterServer::Service {
 public:
  // `token` empty: no authentication (api::kEnvJobToken unset).
  // `metrics` (borrowed, may be null) counts the tensor bytes moved.
  PsService(PsShard& shard, std::string token, metrics::RuntimeMetrics* metrics = nullptr)
      : shard_(shard), token_(std::move(token)), metrics_(metrics) {}

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override;
  grpc::Status Initialize(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushMessage>* reader,
                          v1::PushResponse* resp) override;
  grpc::Status Push(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushMessage>* reader,
                    v1::PushResponse* resp) override;
  grpc::Status Pull(grpc::ServerContext* ctx, const v1::PullRequest* req,
                    grpc::ServerWriter<v1::PullMessage>* writer) override;
  grpc::Status Done(grpc::ServerContext* ctx, const v1::DoneRequest* req,
                    v1::DoneResponse* resp) override;
  grpc::Status Checkpoint(grpc::ServerContext* ctx, const v1::CheckpointRequest* req,
                          v1::CheckpointResponse* resp) override;
  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::StatusRequest* req,
                         v1::StatusResponse* resp) override;

 private:
  // The job-token check of calls that join or push: a refusal is logged and
  // counted as a rejected push (reason bad_token), since it is another job's
  // worker or a stranger trying to write to this shard.
  grpc::Status CheckWriterToken(const grpc::ServerContext& ctx, const char* call);
  grpc::Status ReceiveInto(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushMessage>* reader,
                           bool initialize, v1::PushResponse* resp);

  PsShard& shard_;
  const std::string token_;
  metrics::RuntimeMetrics* const metrics_;
  std::mutex pull_mu_;
  std::vector<std::unique_ptr<AlignedBuffer>> pull_buffers_;  // per worker (+1 for observers)
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SERVICE_H_
