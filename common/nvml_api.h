// The subset of NVIDIA's NVML C API that gpuslice implements (the simulated libnvidia-ml) and
// intercepts (the shim). No nvml.h is installed on these machines, so the declarations below
// are written from NVIDIA's public NVML API reference; names, values, struct layouts and
// calling conventions match nvml.h exactly, so that code compiled against either one talks to
// the other. Nothing beyond nvml.h is declared here.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;

// Buffer sizes the API reference recommends for string queries.
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80

// nvmlInitWithFlags flags.
#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

// Versioned structs carry their size and version in their first field.
#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

#define NVML_VALUE_NOT_AVAILABLE (-1)

// nvmlSystemGetCudaDriverVersion's value is 1000 * major + 10 * minor.
#define NVML_CUDA_DRIVER_VERSION_MAJOR(v) ((v) / 1000)
#define NVML_CUDA_DRIVER_VERSION_MINOR(v) (((v) % 1000) / 10)

typedef struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;  // allocated; includes what the driver reserves, unlike v2
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;  // set to nvmlMemory_v2 by the caller
  unsigned long long total;
  unsigned long long reserved;  // kept by the system firmware and driver
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

// The layout nvmlDeviceGetComputeRunningProcesses_v3 fills (also nvmlProcessInfo_v2_t).
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE when unknown
  unsigned int gpuInstanceId;        // 0xFFFFFFFF unless MIG is enabled
  unsigned int computeInstanceId;    // 0xFFFFFFFF unless MIG is enabled
} nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time of the sample, microseconds since the epoch
  unsigned int smUtil;           // percent
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;     // percent of the sample period during which a kernel was executing
  unsigned int memory;  // percent of the sample period during which memory was read or written
} nvmlUtilization_t;

// MPS v3 memory partitioning (driver r615 / CUDA 13.4 and later): device-memory limits of a
// cgroup, for the processes in it and its descendants. The hard limit fails allocations past it
// with out-of-memory; the soft limit is what is guaranteed before allocations may fail under
// memory pressure (over it, a process is an eviction candidate). MIG handles are not supported.
typedef struct {
  const char* nameSpace;         // [in] the cgroup's full sysfs path ("/sys/fs/cgroup/...")
  unsigned long long softLimit;  // [in] bytes
  unsigned long long hardLimit;  // [in] bytes
} nvmlSetMemoryLimits_v1_t;

typedef struct {
  const char* nameSpace;           // [in] the cgroup's full sysfs path
  unsigned long long softLimit;    // [out] bytes
  unsigned long long hardLimit;    // [out] bytes
  unsigned long long currentUsed;  // [out] bytes the cgroup's processes hold now
} nvmlGetMemoryLimits_v1_t;

// A soft limit of 0 with this hard limit is "no limit": setting them clears the cgroup's limits.
#define NVML_DEVICE_MEMORY_LIMIT_MAX 0xFFFFFFFFFFFFFFFFULL

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char* nvmlErrorString(nvmlReturn_t result);

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion);

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor);

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization);

// Requires root. NVML_ERROR_NOT_SUPPORTED where the driver or the device (MIG) has no partitioning.
nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, nvmlSetMemoryLimits_v1_t* limits);
nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device, nvmlGetMemoryLimits_v1_t* limits);

// As in nvml.h: unversioned names resolve to the current versions at compile time, and the
// legacy entry points (still exported by every libnvidia-ml) are declared only on request.
#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device);
#else
#define nvmlInit nvmlInit_v2
#define nvmlDeviceGetCount nvmlDeviceGetCount_v2
#define nvmlDeviceGetHandleByIndex nvmlDeviceGetHandleByIndex_v2
#define nvmlDeviceGetComputeRunningProcesses nvmlDeviceGetComputeRunningProcesses_v3
#endif

#ifdef __cplusplus
}  // extern "C"
#endif
