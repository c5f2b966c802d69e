# Include roots shared by every kubetrain library:
#   #include "kubetrain/clock.h"        (public runtime API)
#   #include "runtime/nn/dense.h"       (internal, from the repository root)
add_library(kubetrain_headers INTERFACE)
add_library(kubetrain::headers ALIAS kubetrain_headers)
target_include_directories(kubetrain_headers INTERFACE
  "${PROJECT_SOURCE_DIR}/runtime/include"
  "${PROJECT_SOURCE_DIR}")
target_link_libraries(kubetrain_headers INTERFACE absl::status absl::statusor absl::strings)

# kubetrain_library(<part> SOURCES ... DEPS ...) -> static kubetrain::<part>
function(kubetrain_library part)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(kubetrain_${part} STATIC ${ARG_SOURCES})
  add_library(kubetrain::${part} ALIAS kubetrain_${part})
  target_link_libraries(kubetrain_${part} PUBLIC kubetrain::headers ${ARG_DEPS})
  kubetrain_target(kubetrain_${part})
endfunction()
