# Layering: who may link what, checked at configure time over the link graph. Two rules:
#
# 1. Product targets — what a user installs and runs (the shim, the broker, gpuslicectl, the
#    exporter, the device plugin, the DRA driver, gpuslice-place and their libraries) — never
#    reach the simulator or the tests, directly or through another library. The simulator plays
#    NVIDIA's hardware for the tests; a product that linked it (for a MIG table, a helper) would
#    ship the simulation.
# 2. Between product targets (every target defined in a product folder), each direct link is an
#    edge of GPUSLICE_ALLOWED_EDGES below: each library one concept, and the edges between them
#    few and deliberate. A new edge is a design decision: add it here, with the reason, or move
#    what is needed into a library of its own (gpu/ holds the node's GPUs for every tool).
#
# A violation stops the configure with one line per path or edge. (Include lines are checked by
# scripts/check-layering.sh, run by ctest; tests/layering/ shows both rules refusing.)

set(GPUSLICE_PRODUCT_FOLDERS common gpu broker shim driverlimits ctl exporter deviceplugin dra place)

# "<from> -> <to> [<to>...]": the product targets <from> may link directly.
set(GPUSLICE_ALLOWED_EDGES
  # common/: the OS and parsing helpers everything uses; the device plugin's pods file (JSON).
  "gpuslice_pod_names -> gpuslice_common"
  # gpu/: NVML loaded in one place, the node's devices, the choice among them.
  "gpuslice_gpu_inventory -> gpuslice_common"
  # broker/: the shared state file.
  "gpuslice_broker -> gpuslice_common"
  # shim/: the option table, the interposer's core and libgpuslice.so.
  "gpuslice_options -> gpuslice_common"
  "gpuslice_shim_core -> gpuslice_options gpuslice_broker gpuslice_common gpuslice_proc_table_headers"
  "gpuslice -> gpuslice_shim_core"
  # driverlimits/: the driver's per-cgroup memory limits and their records, and the OCI hook.
  "gpuslice_driverlimits -> gpuslice_common gpuslice_gpu_inventory"
  "gpuslice-driver-limits -> gpuslice_driverlimits"
  # ctl/: reads the state file, writes the options' text forms, plans MIG layouts from NVML.
  "gpuslicectl -> gpuslice_broker gpuslice_options gpuslice_pod_names gpuslice_mig_profiles gpuslice_gpu_inventory gpuslice_driverlimits"
  # exporter/: the state file and NVML's device figures, as Prometheus text.
  "gpuslice_exporter_core -> gpuslice_broker gpuslice_common gpuslice_pod_names gpuslice_gpu_inventory"
  "gpuslice-exporter -> gpuslice_exporter_core"
  # deviceplugin/: the kubelet's API, the node's GPUs and their choice, the option table; the
  # broker for the memory its pods request (reserved in the state file before they start).
  "gpuslice_deviceplugin_core -> gpuslice_deviceplugin_api gpuslice_gpu_inventory gpuslice_gpu_choice gpuslice_options gpuslice_broker gpuslice_common"
  "gpuslice-device-plugin -> gpuslice_deviceplugin_core"
  # dra/: its own kubelet APIs, the node's GPUs, the option table and the broker (a claim's
  # memory reserved); not the device plugin.
  "gpuslice_dra_core -> gpuslice_dra_api gpuslice_gpu_inventory gpuslice_options gpuslice_broker gpuslice_common"
  "gpuslice-dra-driver -> gpuslice_dra_core"
  # place/: the placement simulator, with NVIDIA's MIG tables.
  "gpuslice_place -> gpuslice_mig_profiles"
  "gpuslice-place -> gpuslice_place"
)

# Does `target` reach a forbidden target? *path gets the chain when it does.
function(_gpuslice_reaches_forbidden target chain visited_var result_var path_var)
  set(visited ${${visited_var}})
  list(FIND visited ${target} seen)
  if(NOT seen EQUAL -1)
    set(${result_var} FALSE PARENT_SCOPE)
    return()
  endif()
  list(APPEND visited ${target})
  set(${visited_var} ${visited} PARENT_SCOPE)
  if(target MATCHES "^gpuslice_sim|^gpuslice-sim$|^gpuslice_simstate$|^gpuslice_test_support$|^gpuslice_fake_kubelet$|^gpuslice_fairness_harness$")
    set(${result_var} TRUE PARENT_SCOPE)
    set(${path_var} "${chain}" PARENT_SCOPE)
    return()
  endif()
  _gpuslice_direct_links(${target} links)
  foreach(link IN LISTS links)
    _gpuslice_reaches_forbidden(${link} "${chain} -> ${link}" visited found found_path)
    if(found)
      set(${visited_var} ${visited} PARENT_SCOPE)
      set(${result_var} TRUE PARENT_SCOPE)
      set(${path_var} "${found_path}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${visited_var} ${visited} PARENT_SCOPE)
  set(${result_var} FALSE PARENT_SCOPE)
endfunction()

# The targets `target` links directly (PUBLIC, PRIVATE or INTERFACE), targets only.
function(_gpuslice_direct_links target out_var)
  get_target_property(type ${target} TYPE)
  set(links "")
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(direct ${target} LINK_LIBRARIES)
    if(direct)
      list(APPEND links ${direct})
    endif()
  endif()
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(interface)
    list(APPEND links ${interface})
  endif()
  set(targets "")
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
    if(TARGET ${link})
      list(APPEND targets ${link})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES targets)
  set(${out_var} ${targets} PARENT_SCOPE)
endfunction()

# Checks both rules over `products` against `edges` (a list like GPUSLICE_ALLOWED_EDGES); stops
# the configure with every violation.
function(gpuslice_check_layering_of products edges)
  set(problems "")
  foreach(target IN LISTS products)
    set(visited "")
    _gpuslice_reaches_forbidden(${target} "${target}" visited found path)
    if(found)
      string(APPEND problems "\n  ${path}: a product target reaches the simulator or the tests")
    endif()
  endforeach()
  foreach(edge IN LISTS edges)
    if(NOT edge MATCHES "^([^ ]+) -> (.+)$")
      message(FATAL_ERROR "gpuslice layering: '${edge}' is not an edge ('<from> -> <to> [<to>...]')")
    endif()
    string(REPLACE " " ";" allowed_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endforeach()
  foreach(target IN LISTS products)
    _gpuslice_direct_links(${target} links)
    foreach(link IN LISTS links)
      list(FIND products ${link} is_product)
      list(FIND allowed_${target} ${link} is_allowed)
      if(NOT is_product EQUAL -1 AND is_allowed EQUAL -1)
        string(APPEND problems "\n  ${target} -> ${link}: an edge GPUSLICE_ALLOWED_EDGES does not list")
      endif()
    endforeach()
  endforeach()
  if(problems)
    message(FATAL_ERROR "gpuslice layering (cmake/CheckLayering.cmake): product targets link what they may not "
                        "(move what they need into a library of its own, such as gpu/'s, or list the edge "
                        "with its reason):${problems}")
  endif()
endfunction()

# The product targets: every library and program defined in a product folder that was added.
function(gpuslice_product_targets out_var)
  get_property(added DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY SUBDIRECTORIES)
  set(products "")
  foreach(folder IN LISTS GPUSLICE_PRODUCT_FOLDERS)
    list(FIND added ${PROJECT_SOURCE_DIR}/${folder} at)
    if(at EQUAL -1)
      continue()
    endif()
    get_property(targets DIRECTORY ${PROJECT_SOURCE_DIR}/${folder} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(NOT type STREQUAL "UTILITY")
        list(APPEND products ${target})
      endif()
    endforeach()
  endforeach()
  set(${out_var} ${products} PARENT_SCOPE)
endfunction()

function(gpuslice_check_layering)
  gpuslice_product_targets(products)
  gpuslice_check_layering_of("${products}" "${GPUSLICE_ALLOWED_EDGES}")
endfunction()
