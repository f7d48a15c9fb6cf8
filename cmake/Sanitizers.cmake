# -DGPUSLICE_SANITIZE=address builds everything with ASan+UBSan, =thread with TSan.
if(GPUSLICE_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(GPUSLICE_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT GPUSLICE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "GPUSLICE_SANITIZE must be '', 'address' or 'thread', not '${GPUSLICE_SANITIZE}'")
endif()
if(GPUSLICE_SANITIZE)
  # Tests whose subject a sanitizer runtime changes (what ldd lists for the shim, how fast things
  # run) check for it: GPUSLICE_SANITIZER_BUILD is "address" or "thread".
  add_compile_definitions(GPUSLICE_SANITIZER_BUILD="${GPUSLICE_SANITIZE}")
endif()

# -DGPUSLICE_FUZZ=ON (clang only): coverage instrumentation for libFuzzer, with ASan + UBSan, for
# the targets in fuzz/ (scripts/fuzz.sh). Not combined with GPUSLICE_SANITIZE.
option(GPUSLICE_FUZZ "Build the libFuzzer targets in fuzz/ (clang)" OFF)
if(GPUSLICE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR GPUSLICE_SANITIZE)
    message(FATAL_ERROR "GPUSLICE_FUZZ needs clang (CXX=clang++) and no GPUSLICE_SANITIZE: use scripts/fuzz.sh")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
