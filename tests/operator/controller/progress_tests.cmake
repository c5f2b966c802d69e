# Tests of the progress poller and the Prometheus text parser. Included from
# tests/operator/controller/CMakeLists.txt.
kubetrain_test(prometheus_text_test
  SOURCES "${CMAKE_CURRENT_LIST_DIR}/prometheus_text_test.cc"
  LIBS kubetrain::prometheus_text)
# The runtime's world read from a metrics page, and the MembershipChanged
# event's message.
kubetrain_test(world_membership_test
  SOURCES "${CMAKE_CURRENT_LIST_DIR}/world_membership_test.cc"
  LIBS kubetrain::progress_poller)
# Against the API emulator (or KUBETRAIN_TEST_KUBECONFIG), with a loopback
# HTTP server standing in for the chief's metrics endpoint.
kubetrain_test(progress_poller_test
  SOURCES "${CMAKE_CURRENT_LIST_DIR}/progress_poller_test.cc"
  LIBS kubetrain::progress_poller kubetrain::kube kubetrain::kube_test_target
  LABELS integration TIMEOUT 120)
kubetrain_realapi_test(progress_poller_test TIMEOUT 120)
