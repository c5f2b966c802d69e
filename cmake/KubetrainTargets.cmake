# The include root shared by every kubetrain library: the repository root,
#   #include "base/clock.h"
#   #include "runtime/nn/dense.h"
add_library(kubetrain_headers INTERFACE)
add_library(kubetrain::headers ALIAS kubetrain_headers)
target_include_directories(kubetrain_headers INTERFACE "${PROJECT_SOURCE_DIR}")
target_link_libraries(kubetrain_headers INTERFACE absl::status absl::statusor absl::strings)

# kubetrain_library(<part> [HDRS ...] SOURCES ... DEPS ...) -> static
# kubetrain::<part>. HDRS names the library's public headers (as
# absl_cc_library does): they are part of the target, so IDEs and
# `cmake --build --target` see them, and a header-only part needs no SOURCES.
function(kubetrain_library part)
  cmake_parse_arguments(ARG "" "" "HDRS;SOURCES;DEPS" ${ARGN})
  add_library(kubetrain_${part} STATIC ${ARG_HDRS} ${ARG_SOURCES})
  add_library(kubetrain::${part} ALIAS kubetrain_${part})
  target_link_libraries(kubetrain_${part} PUBLIC kubetrain::headers ${ARG_DEPS})
  kubetrain_target(kubetrain_${part})
endfunction()
