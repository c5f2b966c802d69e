# Every third-party dependency is found here, once.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(ZLIB REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
# Kubernetes API client (operator/kube). Its U() macro clashes with fmt:
# every target that sees cpprest headers gets _TURN_OFF_PLATFORM_STRING.
find_package(cpprestsdk CONFIG REQUIRED)
target_compile_definitions(cpprestsdk::cpprest INTERFACE _TURN_OFF_PLATFORM_STRING)
# Metrics (runtime/metrics, operator) and the test API emulator's HTTP server.
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(civetweb CONFIG REQUIRED)

# OpenBLAS: Debian ships a pkg-config file; its cblas.h carries
# openblas_set_num_threads.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
add_library(kubetrain::openblas ALIAS PkgConfig::OPENBLAS)

find_program(KUBETRAIN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

if(KUBETRAIN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KUBETRAIN_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
