# Install rules and the Debian package.
#
#   cmake --install build [--prefix P]      (P defaults to /usr/local)
#   cd build && cpack -G DEB                 (gpuslice_<version>_<arch>.deb, installs under /usr/local)
#
# One layout under every prefix, so that the path a manifest, an image or /etc/ld.so.preload names
# is the same whichever way gpuslice was installed:
#   P/lib/gpuslice/libgpuslice.so        the preloaded library
#   P/lib/gpuslice/sim/                  the simulated driver (libcuda.so.1, libnvidia-ml.so.1), to
#                                        try gpuslice without a GPU; only found with
#                                        LD_LIBRARY_PATH=P/lib/gpuslice/sim, never by default
#   P/bin/                               gpuslicectl, gpuslice-entrypoint, gpuslice-sim,
#                                        gpuslice-workload, vector_add_driver
#   P/share/doc/gpuslice/                README, docs/, every tool's --help (help/<tool>.txt)
#   P/share/gpuslice/examples/           the container, Kubernetes and sample examples
# The .deb keeps /usr/local rather than Debian's /usr for that reason: the image
# (examples/container/Dockerfile) installs the .deb, and every document names
# /usr/local/lib/gpuslice/libgpuslice.so. gpuslice-bench runs from the build tree and is not
# installed.

install(TARGETS gpuslice LIBRARY DESTINATION lib/gpuslice)
install(TARGETS gpuslice_sim_cuda gpuslice_sim_nvml LIBRARY DESTINATION lib/gpuslice/sim NAMELINK_SKIP)
install(TARGETS gpuslicectl gpuslice-sim gpuslice-workload vector_add_driver RUNTIME DESTINATION bin)
install(TARGETS gpuslice-exporter RUNTIME DESTINATION bin)  # docs/observability.md
install(PROGRAMS ${CMAKE_BINARY_DIR}/bin/gpuslice-entrypoint DESTINATION bin)
install(FILES README.md DESTINATION share/doc/gpuslice)
install(DIRECTORY docs/ DESTINATION share/doc/gpuslice/docs)
install(DIRECTORY ${CMAKE_BINARY_DIR}/help/ DESTINATION share/doc/gpuslice/help)
install(DIRECTORY examples/ DESTINATION share/gpuslice/examples PATTERN CMakeLists.txt EXCLUDE)

set(CPACK_PACKAGE_NAME gpuslice)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR gpuslice)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "soft fractional GPUs: per-tenant GPU memory quotas and compute shares")
# One string: set() with several quoted arguments makes a list, and its ';' separators would
# show in the package's description.
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "libgpuslice.so, preloaded, interposes the CUDA driver API to enforce each tenant's GPU memory\n"
    "quota and weighted share of compute time on a shared NVIDIA GPU; gpuslicectl shows and sets\n"
    "it; gpuslice-entrypoint validates a container's settings and preloads the library.")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr/local)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "gpuslice maintainers <gpuslice@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # the tools' shared libraries (fmt); the library needs only glibc
# vector_add_driver links libcuda.so.1, the node's driver (or the packaged simulated one): not a
# package dependency, but dpkg-shlibdeps must find it to look past it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${GPUSLICE_SIM_LIB_DIR})
set(CPACK_STRIP_FILES ON)
include(CPack)

# Every tool's --help as text files, regenerated when a tool changes.
set(help_stamp ${CMAKE_BINARY_DIR}/help/gpuslicectl.txt)
add_custom_command(OUTPUT ${help_stamp}
  COMMAND ${CMAKE_COMMAND} -DBIN=${CMAKE_BINARY_DIR}/bin -DOUT=${CMAKE_BINARY_DIR}/help -DSIMLIB=${GPUSLICE_SIM_LIB_DIR}
          -P ${PROJECT_SOURCE_DIR}/cmake/HelpTexts.cmake
  DEPENDS gpuslicectl gpuslice-exporter gpuslice-sim gpuslice-workload vector_add_driver gpuslice_sim_cuda ${CMAKE_BINARY_DIR}/bin/gpuslice-entrypoint
          ${PROJECT_SOURCE_DIR}/cmake/HelpTexts.cmake
  COMMENT "Writing every tool's --help to help/")
add_custom_target(gpuslice-help-texts ALL DEPENDS ${help_stamp})

# The build tree keeps the installed layout's library path too (<build>/lib/gpuslice/), so that
# <build>/bin/gpuslice-entrypoint finds <build>/lib/gpuslice/libgpuslice.so as an installed one
# finds its own.
add_custom_target(gpuslice-build-layout ALL
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/lib/gpuslice
  COMMAND ${CMAKE_COMMAND} -E create_symlink ../libgpuslice.so ${CMAKE_BINARY_DIR}/lib/gpuslice/libgpuslice.so)
