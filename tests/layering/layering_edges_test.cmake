# The layering check refuses what it must (cmake/CheckLayering.cmake): the fixture project
# (tests/layering/CMakeLists.txt) configures with the allowed edges alone (the control), and
# fails, naming the edge, with each of: the DRA driver linking the device plugin, the shim's
# core or the placement experiment; the device plugin linking the shim's core; a product
# library reaching the simulator.
#   cmake -DGPUSLICE_SOURCE_DIR=<src> -DWORK_DIR=<scratch> -P layering_edges_test.cmake
set(fixture ${GPUSLICE_SOURCE_DIR}/tests/layering)
set(failures "")

# Configures the fixture with `edge` ("" for none); sets rc and out in the caller.
function(configure_fixture name edge)
  file(REMOVE_RECURSE ${WORK_DIR}/${name})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${fixture} -B ${WORK_DIR}/${name}
                          -DGPUSLICE_SOURCE_DIR=${GPUSLICE_SOURCE_DIR} "-DEXTRA_EDGE=${edge}"
                  RESULT_VARIABLE code OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  set(rc ${code} PARENT_SCOPE)
  set(out "${stdout}${stderr}" PARENT_SCOPE)
endfunction()

configure_fixture(control "")
if(NOT rc EQUAL 0)
  string(APPEND failures "\nthe control (allowed edges only) did not configure:\n${out}")
endif()

foreach(case "gpuslice_dra_core;gpuslice_deviceplugin_core" "gpuslice_dra_core;gpuslice_shim_core"
             "gpuslice_dra_core;gpuslice_place" "gpuslice_deviceplugin_core;gpuslice_shim_core")
  list(GET case 0 from)
  list(GET case 1 to)
  configure_fixture(${from}-${to} "${case}")
  string(REGEX REPLACE "[ \n]+" " " flat "${out}")
  if(rc EQUAL 0)
    string(APPEND failures "\n${from} -> ${to} configured: the edge was not refused")
  elseif(NOT flat MATCHES "${from} -> ${to}: an edge GPUSLICE_ALLOWED_EDGES does not list")
    string(APPEND failures "\n${from} -> ${to} failed without naming the edge:\n${out}")
  endif()
endforeach()

configure_fixture(simulator "gpuslice_gpu_inventory;gpuslice_sim_cuda")
string(REGEX REPLACE "[ \n]+" " " flat "${out}")
if(rc EQUAL 0 OR NOT flat MATCHES "gpuslice_dra_core -> gpuslice_gpu_inventory -> gpuslice_sim_cuda: a product target reaches the simulator")
  string(APPEND failures "\na product reaching the simulator was not refused with its path:\n${out}")
endif()

if(failures)
  message(FATAL_ERROR "layering check:${failures}")
endif()
message(STATUS "layering check: the allowed edges configure; 4 forbidden edges and a path to the simulator are refused")
