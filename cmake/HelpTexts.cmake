# cmake -DBIN=<build>/bin -DOUT=<dir> -DSIMLIB=<build>/simlib -P HelpTexts.cmake: writes every installed tool's --help,
# and each subcommand's, to OUT/<tool>[-<subcommand>].txt (installed in share/doc/gpuslice/help/).
set(pages
  "gpuslicectl" "gpuslicectl status" "gpuslicectl set" "gpuslicectl options" "gpuslicectl top" "gpuslicectl plan" "gpuslice-exporter"
  "gpuslice-driver-limits" "gpuslice-driver-limits set" "gpuslice-driver-limits clear"
  "gpuslice-sim" "gpuslice-workload" "gpuslice-workload compute" "gpuslice-workload latency"
  "gpuslice-workload memory" "gpuslice-entrypoint" "vector_add_driver")
file(MAKE_DIRECTORY ${OUT})
# vector_add_driver links libcuda.so.1 without a run path: the simulated one answers --help.
set(ENV{LD_LIBRARY_PATH} "${SIMLIB}")
foreach(page ${pages})
  separate_arguments(words UNIX_COMMAND "${page}")
  list(POP_FRONT words tool)
  string(REPLACE " " "-" name "${page}")
  execute_process(COMMAND ${BIN}/${tool} ${words} --help OUTPUT_FILE ${OUT}/${name}.txt RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${page} --help failed (${status})")
  endif()
endforeach()
