#!/usr/bin/env bash
# Installs the Debian packages gpuslice builds with, if any is missing. Idempotent and quiet
# when everything is there. The CUDA toolkit (headers only) is expected at /usr/local/cuda or
# wherever CUDAToolkit_ROOT points; it is not a Debian package.
set -euo pipefail

packages=(
  cmake g++ make python3 python3-yaml
  libfmt-dev libboost-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  gnuplot-nox
  # libFuzzer targets (scripts/fuzz.sh): Debian's clang and its runtime libraries, which hold
  # libclang_rt.fuzzer and the sanitizers' runtimes for clang.
  clang libclang-rt-dev
  # The thread-safety check (scripts/check-thread-safety.sh): clang++-14's -Wthread-safety.
  clang-14
  # The package and its test (cpack's DEB generator; file(1) for its dependencies).
  dpkg-dev file
  # Observability (docs/observability.md): gpuslice-exporter's HTTP server, and the Prometheus
  # server, promtool and tmux its tests and `gpuslicectl top`'s test run.
  libcpp-httplib-dev pkg-config prometheus tmux
  # gpuslice-exporter gzips its page itself (zlib); its test fetches the page with curl.
  zlib1g-dev curl
  # The Kubernetes device plugin (deviceplugin/): gRPC and protobuf for the kubelet's API,
  # yaml-cpp for its config file (found with pkg-config, above) and gpuslicectl plan's tenants files.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libyaml-cpp-dev
  # The DRA driver names tenants with SHA-256 (OpenSSL's libcrypto, found with pkg-config).
  libssl-dev
  # The DRA driver's tests (tests/dra/*_test.cc) validate ResourceSlices and CDI specs against
  # the official schemas (tests/dra/dra_validate.py), and reach a stand-in API server over HTTPS
  # with a certificate made by openssl.
  python3-jsonschema openssl
  # The sources' layout (.clang-format; scripts/format.sh, scripts/check-format.sh): clang-format 14.
  clang-format
)

# tests/package/package_image_test.cc asks apt-cache which Debian 12 archive holds each package the
# image installs: apt's package lists must be there, even when nothing is missing.
lists_missing=0
ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 || lists_missing=1

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} || lists_missing)); then
  if ((${#missing[@]})); then echo "install-deps: installing ${missing[*]}"; fi
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  if ((${#missing[@]})); then
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
