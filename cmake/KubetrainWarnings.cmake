# Warnings for our own targets: on, and fatal. Third-party headers are
# included as SYSTEM so their warnings never fail our build.
add_library(kubetrain_warnings INTERFACE)
add_library(kubetrain::warnings ALIAS kubetrain_warnings)
target_compile_options(kubetrain_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Werror -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)

# kubetrain_target(<name>): applies the project's warnings and include roots.
function(kubetrain_target name)
  target_link_libraries(${name} PRIVATE kubetrain::warnings)
endfunction()
