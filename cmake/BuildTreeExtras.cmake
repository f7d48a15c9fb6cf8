# What the build tree holds besides its programs, which the tests and the packages use: every
# tool's --help as text (installed in share/doc/gpuslice/help/) and the installed layout's
# library path. Defined before tests/, whose programs depend on them.

# Every tool's --help as text files, regenerated when a tool changes.
set(help_stamp ${CMAKE_BINARY_DIR}/help/gpuslicectl.txt)
add_custom_command(OUTPUT ${help_stamp}
  COMMAND ${CMAKE_COMMAND} -DBIN=${CMAKE_BINARY_DIR}/bin -DOUT=${CMAKE_BINARY_DIR}/help -DSIMLIB=${GPUSLICE_SIM_LIB_DIR}
          -P ${PROJECT_SOURCE_DIR}/cmake/HelpTexts.cmake
  DEPENDS gpuslicectl gpuslice-exporter gpuslice-sim gpuslice-workload vector_add_driver gpuslice_sim_cuda gpuslice-driver-limits
          ${CMAKE_BINARY_DIR}/bin/gpuslice-entrypoint
          ${PROJECT_SOURCE_DIR}/cmake/HelpTexts.cmake
  COMMENT "Writing every tool's --help to help/")
add_custom_target(gpuslice-help-texts ALL DEPENDS ${help_stamp})

# The build tree keeps the installed layout's library path too (<build>/lib/gpuslice/), so that
# <build>/bin/gpuslice-entrypoint finds <build>/lib/gpuslice/libgpuslice.so as an installed one
# finds its own.
add_custom_target(gpuslice-build-layout ALL
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/lib/gpuslice
  COMMAND ${CMAKE_COMMAND} -E create_symlink ../libgpuslice.so ${CMAKE_BINARY_DIR}/lib/gpuslice/libgpuslice.so)
