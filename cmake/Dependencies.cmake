# Every dependency is a Debian package (scripts/install-deps.sh installs them).
# The CUDA toolkit is used for its headers only: nothing links libcuda at build time.

find_package(CUDAToolkit QUIET)
set(GPUSLICE_CUDA_INCLUDE_DIR "" CACHE PATH "Directory holding cuda.h and cudaTypedefs.h (found from the CUDA toolkit when empty)")
if(NOT GPUSLICE_CUDA_INCLUDE_DIR)
  find_path(GPUSLICE_CUDA_INCLUDE_DIR_FOUND cuda.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
  set(GPUSLICE_CUDA_INCLUDE_DIR "${GPUSLICE_CUDA_INCLUDE_DIR_FOUND}")
endif()
if(NOT GPUSLICE_CUDA_INCLUDE_DIR OR NOT EXISTS "${GPUSLICE_CUDA_INCLUDE_DIR}/cudaTypedefs.h")
  message(FATAL_ERROR
    "gpuslice needs the CUDA toolkit headers (cuda.h, cudaTypedefs.h; CUDA 12.5 or newer) and found none. "
    "Point CMake at a toolkit with -DCUDAToolkit_ROOT=/usr/local/cuda or "
    "-DGPUSLICE_CUDA_INCLUDE_DIR=/path/to/cuda/include.")
endif()
message(STATUS "gpuslice: CUDA headers from ${GPUSLICE_CUDA_INCLUDE_DIR}")

add_library(gpuslice_cuda_headers INTERFACE)
target_include_directories(gpuslice_cuda_headers SYSTEM INTERFACE "${GPUSLICE_CUDA_INCLUDE_DIR}")

find_package(fmt REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
if(GPUSLICE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# gpuslice-exporter's HTTP server (Debian's libcpp-httplib-dev: a header and a compiled library,
# found through pkg-config).
find_package(PkgConfig REQUIRED)
pkg_check_modules(GPUSLICE_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# PkgConfig::GPUSLICE_HTTPLIB carries the library's build flags (CPPHTTPLIB_OPENSSL_SUPPORT, ...):
# without them the header declares classes of another layout than the compiled library's.
add_library(gpuslice_httplib INTERFACE)
target_link_libraries(gpuslice_httplib INTERFACE PkgConfig::GPUSLICE_HTTPLIB)
# OpenSSL's libcrypto (Debian's libssl-dev), for SHA-256: the DRA driver's tenant names.
pkg_check_modules(GPUSLICE_CRYPTO REQUIRED IMPORTED_TARGET libcrypto)

# yaml-cpp: gpuslicectl's tenants file, the device plugin's configuration, the DRA driver's kubeconfig.
pkg_check_modules(GPUSLICE_YAML REQUIRED IMPORTED_TARGET GLOBAL yaml-cpp)
# The Kubernetes daemons (the device plugin, the DRA driver): gRPC and protobuf, found once for
# both (GLOBAL: pkg-config's imported targets are otherwise seen only in the directory that
# found them). Without them neither daemon is built; scripts/install-deps.sh installs them.
pkg_check_modules(GPUSLICE_GRPC IMPORTED_TARGET GLOBAL grpc++ protobuf)
find_program(GPUSLICE_PROTOC protoc)
find_program(GPUSLICE_GRPC_CPP_PLUGIN grpc_cpp_plugin)
if(GPUSLICE_GRPC_FOUND AND GPUSLICE_PROTOC AND GPUSLICE_GRPC_CPP_PLUGIN)
  set(GPUSLICE_KUBERNETES_DAEMONS ON)
else()
  set(GPUSLICE_KUBERNETES_DAEMONS OFF)
  message(STATUS "gpuslice: no gRPC or protobuf (scripts/install-deps.sh): the device plugin and the DRA driver are not built")
endif()

# A .proto of the kubelet's APIs compiled into <out_dir>/<api>.pb.cc/.grpc.pb.cc (and headers);
# the two sources are appended to the list named by sources_var.
function(gpuslice_kubelet_api proto_dir api out_dir sources_var)
  set(proto ${proto_dir}/${api}.proto)
  add_custom_command(
    OUTPUT ${out_dir}/${api}.pb.cc ${out_dir}/${api}.pb.h ${out_dir}/${api}.grpc.pb.cc ${out_dir}/${api}.grpc.pb.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
    COMMAND ${GPUSLICE_PROTOC} --cpp_out=${out_dir} --grpc_out=${out_dir}
            --plugin=protoc-gen-grpc=${GPUSLICE_GRPC_CPP_PLUGIN} -I${proto_dir} ${proto}
    DEPENDS ${proto}
    COMMENT "Generating the kubelet's ${api} API")
  set(${sources_var} ${${sources_var}} ${out_dir}/${api}.pb.cc ${out_dir}/${api}.grpc.pb.cc PARENT_SCOPE)
endfunction()
