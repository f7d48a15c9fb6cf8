# cmake -DBUILD=<build tree> -DOUT=<dir> -P build_packages.cmake: the Debian packages of BUILD,
# made by cpack into OUT (emptied first), for the tests that read them (tests/package/). cpack
# installs what the build tree holds: it takes about a minute on a loaded 2-core machine.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND cpack -G DEB --config ${BUILD}/CPackConfig.cmake -B ${OUT}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cpack failed (${status}):\n${out}\n${err}")
endif()
file(GLOB debs ${OUT}/*.deb)
message(STATUS "packages: ${debs}")
