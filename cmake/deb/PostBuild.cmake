# CPACK_POST_BUILD_SCRIPTS: every .deb cpack made lists only gpuslice's own directories
# (own_only_gpuslice_paths.py says why). CPACK_PACKAGE_FILES: the packages just made.
foreach(package ${CPACK_PACKAGE_FILES})
  execute_process(COMMAND ${CPACK_GPUSLICE_PYTHON} ${CPACK_GPUSLICE_DEB_DIR}/own_only_gpuslice_paths.py ${package}
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "own_only_gpuslice_paths.py failed on ${package}")
  endif()
endforeach()
