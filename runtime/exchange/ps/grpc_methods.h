// The full gRPC method names of kubetrain.v1.ParameterServer
// (proto/kubetrain/v1/parameter_server.proto), for the server that
// registers them by hand (grpc_shard_server.h) and the clients that call
// them with raw frames (shard_client.h, grpc_step_transport.h).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_METHODS_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_METHODS_H_

namespace kubetrain::ps {

// Full method names of kubetrain.v1.ParameterServer.
inline constexpr char kPsRegisterMethod[] = "/kubetrain.v1.ParameterServer/Register";
inline constexpr char kPsInitializeMethod[] = "/kubetrain.v1.ParameterServer/Initialize";
inline constexpr char kPsPushMethod[] = "/kubetrain.v1.ParameterServer/Push";
inline constexpr char kPsPullMethod[] = "/kubetrain.v1.ParameterServer/Pull";
inline constexpr char kPsPushPullMethod[] = "/kubetrain.v1.ParameterServer/PushPull";
inline constexpr char kPsDoneMethod[] = "/kubetrain.v1.ParameterServer/Done";
inline constexpr char kPsCheckpointMethod[] = "/kubetrain.v1.ParameterServer/Checkpoint";
inline constexpr char kPsGetStatusMethod[] = "/kubetrain.v1.ParameterServer/GetStatus";

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_METHODS_H_
