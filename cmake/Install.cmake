# Install rules and the Debian packages.
#
#   cmake --install build [--prefix P]      (P defaults to /usr/local)
#   cd build && cpack -G DEB                 (two packages, both installing under /usr/local)
#
# One layout under every prefix, so that the path a manifest, an image or /etc/ld.so.preload names
# is the same whichever way gpuslice was installed (common/install_layout.h holds the library's):
#   P/lib/gpuslice/libgpuslice.so        the preloaded library
#   P/lib/gpuslice/sim/                  the simulated driver (libcuda.so.1, libnvidia-ml.so.1), to
#                                        try gpuslice without a GPU; only found with
#                                        LD_LIBRARY_PATH=P/lib/gpuslice/sim, never by default
#   P/bin/                               gpuslicectl, gpuslice-entrypoint, gpuslice-exporter,
#                                        gpuslice-driver-limits, gpuslice-place, gpuslice-sim,
#                                        gpuslice-workload, vector_add_driver; the Kubernetes daemons
#                                        gpuslice-device-plugin and gpuslice-dra-driver
#   P/share/doc/gpuslice/                README, LICENSE, docs/, every tool's --help (help/<tool>.txt)
#   P/share/gpuslice/examples/           the container, Kubernetes and sample examples
#
# Two components, one package each:
#   node        gpuslice              the library, the node's tools, the simulated driver, docs
#   kubernetes  gpuslice-kubernetes   the device plugin and the DRA driver (gRPC, protobuf and
#                                     yaml-cpp at run time); built only where gRPC is installed
# The .debs keep /usr/local rather than Debian's /usr for the one layout's sake (every document
# names /usr/local/lib/gpuslice/libgpuslice.so), and own none of /usr/local's shared directories
# (cmake/deb/own_only_gpuslice_paths.py; cmake/deb/preinst makes those missing). Each has its
# Debian copyright file in /usr/share/doc/<package>/ and LICENSE beside its documents; the
# gpuslice package creates the `gpuslice` system group (cmake/deb/postinst). gpuslice-bench runs
# from the build tree and is not installed.

# Installing (cmake --install, cpack) copies what the build made and builds nothing: cpack's
# `preinstall` would otherwise build every target, the tests' included, a second time where
# only the installed ones were built (tests/package/build_packages.cmake runs cpack in tests).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS gpuslice LIBRARY DESTINATION lib/gpuslice COMPONENT node)
install(TARGETS gpuslice_sim_cuda gpuslice_sim_nvml LIBRARY DESTINATION lib/gpuslice/sim NAMELINK_SKIP COMPONENT node)
install(TARGETS gpuslicectl gpuslice-sim gpuslice-workload vector_add_driver gpuslice-place gpuslice-exporter
        gpuslice-driver-limits RUNTIME DESTINATION bin COMPONENT node)
install(PROGRAMS ${CMAKE_BINARY_DIR}/bin/gpuslice-entrypoint DESTINATION bin COMPONENT node)
install(FILES README.md LICENSE DESTINATION share/doc/gpuslice COMPONENT node)
install(DIRECTORY docs/ DESTINATION share/doc/gpuslice/docs COMPONENT node)
install(DIRECTORY ${CMAKE_BINARY_DIR}/help/ DESTINATION share/doc/gpuslice/help COMPONENT node)
install(DIRECTORY examples/ DESTINATION share/gpuslice/examples COMPONENT node PATTERN CMakeLists.txt EXCLUDE)
# Debian's place for a package's copyright, outside the prefix: only in the packages (a
# component's own install), never in `cmake --install` (EXCLUDE_FROM_ALL).
install(FILES cmake/deb/copyright DESTINATION /usr/share/doc/gpuslice COMPONENT node EXCLUDE_FROM_ALL)
set(gpuslice_components node)
if(TARGET gpuslice-device-plugin AND TARGET gpuslice-dra-driver)
  install(TARGETS gpuslice-device-plugin gpuslice-dra-driver RUNTIME DESTINATION bin COMPONENT kubernetes)
  install(FILES LICENSE DESTINATION share/doc/gpuslice-kubernetes COMPONENT kubernetes)
  install(FILES cmake/deb/copyright DESTINATION /usr/share/doc/gpuslice-kubernetes COMPONENT kubernetes
          EXCLUDE_FROM_ALL)
  list(APPEND gpuslice_components kubernetes)
endif()

set(CPACK_PACKAGE_NAME gpuslice)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR gpuslice)
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr/local)
# The copyright files' absolute destination lands in the staging tree, not on this machine.
set(CPACK_SET_DESTDIR ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ${gpuslice_components})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)  # what own_only_gpuslice_paths.py rewrites
set(GPUSLICE_PACKAGE_MAINTAINER "gpuslice maintainers <maintainers@gpuslice.io>"
    CACHE STRING "The Debian packages' Maintainer field (a name and an address)")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUSLICE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
# Each binary's shared libraries become the package's Depends (dpkg-shlibdeps): fmt and yaml-cpp
# for the tools; gRPC, protobuf and yaml-cpp for the daemons; the library needs only glibc.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# vector_add_driver links libcuda.so.1, the node's driver (or the packaged simulated one): not a
# package dependency, but dpkg-shlibdeps must find it to look past it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${GPUSLICE_SIM_LIB_DIR})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb/PostBuild.cmake)
set(CPACK_GPUSLICE_PYTHON ${Python3_EXECUTABLE})
set(CPACK_GPUSLICE_DEB_DIR ${PROJECT_SOURCE_DIR}/cmake/deb)

set(CPACK_DEBIAN_NODE_PACKAGE_NAME gpuslice)
set(CPACK_DEBIAN_NODE_FILE_NAME DEB-DEFAULT)
# groupadd, for the postinst.
set(CPACK_DEBIAN_NODE_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_NODE_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/deb/preinst ${PROJECT_SOURCE_DIR}/cmake/deb/postinst)
# One string: set() with several quoted arguments makes a list, and its ';' separators would
# show in the package's description.
string(CONCAT CPACK_DEBIAN_NODE_DESCRIPTION
    "soft fractional GPUs: per-tenant GPU memory quotas and compute shares\n"
    "libgpuslice.so, preloaded, interposes the CUDA driver API to enforce each tenant's GPU memory\n"
    "quota and weighted share of compute time on a shared NVIDIA GPU; gpuslicectl shows and sets\n"
    "it; gpuslice-entrypoint validates a container's settings and preloads the library.")

set(CPACK_DEBIAN_KUBERNETES_PACKAGE_NAME gpuslice-kubernetes)
set(CPACK_DEBIAN_KUBERNETES_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_KUBERNETES_PACKAGE_DEPENDS "gpuslice (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_KUBERNETES_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/deb/preinst)
string(CONCAT CPACK_DEBIAN_KUBERNETES_DESCRIPTION
    "gpuslice's Kubernetes device plugin and DRA driver\n"
    "gpuslice-device-plugin serves gpuslice.io/gpu slices to the kubelet; gpuslice-dra-driver\n"
    "publishes each GPU's memory and compute as consumable DRA capacity and prepares claims. Both\n"
    "make each container a gpuslice tenant of exactly what was booked (docs/kubernetes.md).")
include(CPack)
