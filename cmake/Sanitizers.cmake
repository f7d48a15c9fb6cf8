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
