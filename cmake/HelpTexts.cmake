# cmake -DBIN=<build>/bin -DOUT=<dir> -P HelpTexts.cmake: writes every installed tool's --help,
# and each subcommand's, to OUT/<tool>[-<subcommand>].txt (installed in share/doc/gpuslice/help/).
set(pages
  "gpuslicectl" "gpuslicectl status" "gpuslicectl set" "gpuslicectl options"
  "gpuslice-sim" "gpuslice-workload" "gpuslice-workload compute" "gpuslice-workload latency"
  "gpuslice-workload memory" "gpuslice-entrypoint" "vector_add_driver")
file(MAKE_DIRECTORY ${OUT})
foreach(page ${pages})
  separate_arguments(words UNIX_COMMAND "${page}")
  list(POP_FRONT words tool)
  string(REPLACE " " "-" name "${page}")
  execute_process(COMMAND ${BIN}/${tool} ${words} --help OUTPUT_FILE ${OUT}/${name}.txt RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${page} --help failed (${status})")
  endif()
endforeach()
