// Where an installed gpuslice keeps the library every tenant preloads (cmake/Install.cmake, the
// Debian packages, the image): one path on hosts and in containers alike, so that the path a
// manifest, a CDI spec, /etc/ld.so.preload or a user names is the same everywhere. The
// Kubernetes daemons mount the library into tenants' containers at this path by default.
#pragma once

namespace gpuslice {

inline constexpr char kInstalledLibrary[] = "/usr/local/lib/gpuslice/libgpuslice.so";

}  // namespace gpuslice
