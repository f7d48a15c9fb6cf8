#!/bin/sh
# gpuslice-entrypoint: run a container's command under libgpuslice.so.
#
#   gpuslice-entrypoint [--check] [--library PATH] [--private-state] [--] COMMAND [ARG...]
#
# 1. Validates the GPUSLICE_* variables the container was given (by `docker run -e`, a pod's env,
#    a device plugin) by the rules the shim itself applies, so that a typo or a bad value stops the
#    container at once with one clear line, instead of at the program's first CUDA call. A name
#    meant for gpuslice but not spelt exactly as one of its variables (GPUSLICE_MEMORY_LIMT,
#    GPU_SLICE_MEMORY_LIMIT, gpuslice_memory_limit) is refused as the shim refuses it, with the
#    variable it likely meant.
# 2. Checks the state directory (GPUSLICE_STATE_DIR, default /run/gpuslice): it must exist — on a
#    host, prepared once for the group every tenant shares; in a container, the host's directory
#    mounted into every container of the node — and be writable. In a container, one on the
#    container's own root file system is private to it and gets a warning line (--private-state:
#    meant so, no warning).
# 3. Checks that the library exists and that the dynamic loader can preload it (a trial load
#    into env): a library it cannot preload would be ignored and COMMAND would run unlimited.
#    Adds it to LD_PRELOAD, after whatever LD_PRELOAD already holds (never replacing it).
# 4. exec's COMMAND: it becomes the container's main process, receives its signals, and its
#    exit status is the container's.
#
# --check prints what it would do and runs nothing; --library names libgpuslice.so (default
# <prefix>/lib/gpuslice/libgpuslice.so beside this script's <prefix>/bin, else
# /usr/local/lib/gpuslice/libgpuslice.so, where the image, `cmake --install` and the .deb put it).
# --version prints the version. Exit status: that of COMMAND; 2 when the configuration
# or the usage is wrong (one line per problem on stderr); 127 when COMMAND is not found.
#
# POSIX sh (dash, busybox ash, bash); besides sh it uses env, sed, sort, id and, for the "did you
# mean" suggestion, awk.
# See examples/container/README.md.

set -f # no pathname expansion anywhere: paths and values are taken as they are

me=gpuslice-entrypoint
# Replaced by the build (examples/CMakeLists.txt) with project(VERSION) in the copy it installs.
version=unreleased
library=/usr/local/lib/gpuslice/libgpuslice.so
# Installed under another prefix (cmake --install --prefix X, a scratch root): the library beside
# this script's bin/ is the one installed with it.
# Its directory made absolute first: run as bin/gpuslice-entrypoint or ./gpuslice-entrypoint, a
# relative library path would be looked for from each process's working directory.
case $0 in
  */*) self_dir=${0%/*} ;;
  *) self_dir=$(command -v -- "$0" 2>/dev/null) && self_dir=${self_dir%/*} ;;
esac
self_dir=$(cd -- "${self_dir:-.}" 2>/dev/null && pwd) || self_dir=
case $self_dir in
  */bin)
    [ -f "${self_dir%/bin}/lib/gpuslice/libgpuslice.so" ] && library=${self_dir%/bin}/lib/gpuslice/libgpuslice.so
    ;;
esac
library_default=$library
library_option=
check=0
private_state=0
errors=0
state_dir_default=/run/gpuslice

# The variables the shim reads (`gpuslicectl options`); tests/examples/examples_test.cc keeps this
# list in step with the shim's table.
known_options="GPUSLICE_MEMORY_LIMIT GPUSLICE_MEMORY_LIMIT_<n> GPUSLICE_MEMORY_REQUEST GPUSLICE_MEMORY_REQUEST_<n> GPUSLICE_TENANT GPUSLICE_STATE_DIR GPUSLICE_COMPUTE_REQUEST GPUSLICE_COMPUTE_LIMIT GPUSLICE_COMPUTE_CLASS GPUSLICE_DRIVER_LIBRARY"

usage() {
  cat <<EOF
usage: $me [--check] [--library PATH] [--private-state] [--] COMMAND [ARG...]
Validates the GPUSLICE_* environment, checks the state directory, appends libgpuslice.so to
LD_PRELOAD and exec's COMMAND.
  --check          print what would be done; run nothing
  --library PATH   libgpuslice.so to preload (default $library_default)
  --private-state  a state directory private to this container is meant (no warning)
  --version        print the version and exit
EOF
}

error() {
  printf '%s: error: %s\n' "$me" "$*" >&2
  errors=$((errors + 1))
}

warn() {
  printf '%s: warning: %s\n' "$me" "$*" >&2
}

# --- The shim's value rules (shim/options.cc, common/quantity.cc) ---------------------------

# A plain unsigned decimal integer of at most 20 characters (the shim's ParseUnsigned; whether
# it fits 64 bits is checked by the caller).
is_digits() {
  case $1 in
    '' | *[!0-9]*) return 1 ;;
  esac
  [ "${#1}" -le 20 ]
}

# $1 without leading zeros ("0" for zero).
strip_zeros() {
  set -- "${1#"${1%%[!0]*}"}"
  printf '%s' "${1:-0}"
}

# Whether the decimal digit string $1 <= $2, for numbers of any length.
number_le() {
  a=$(strip_zeros "$1")
  b=$(strip_zeros "$2")
  [ "${#a}" -lt "${#b}" ] && return 0
  [ "${#a}" -gt "${#b}" ] && return 1
  while [ -n "$a" ]; do
    da=${a%"${a#?}"}
    db=${b%"${b#?}"}
    [ "$da" -lt "$db" ] && return 0
    [ "$da" -gt "$db" ] && return 1
    a=${a#?}
    b=${b#?}
  done
  return 0
}

# $digits times two, in place (decimal digits of any length).
double_digits() {
  rest=$digits
  doubled=
  carry=0
  while [ -n "$rest" ]; do
    last=${rest#"${rest%?}"}
    rest=${rest%?}
    sum=$((last * 2 + carry))
    doubled=$((sum % 10))$doubled
    carry=$((sum / 10))
  done
  [ "$carry" -gt 0 ] && doubled=$carry$doubled
  digits=$doubled
}

# $digits without its trailing zeros, each one added to $ten.
strip_trailing_zeros() {
  while :; do
    case $digits in
      *0) digits=${digits%0} ten=$((ten + 1)) ;;
      *) return 0 ;;
    esac
  done
}

# A byte quantity above 0 in the Kubernetes grammar, as common/quantity.cc reads it: an optional
# sign, digits with an optional fraction (4, 1.5, .5), then no suffix, Ki Mi Gi Ti Pi Ei (powers
# of 1024), m k K M G T P E (powers of 1000) or an exponent (4e9, 2E+9). The value must be a whole
# number of bytes (1.5Gi is; 100m and 1.5 are not), at least 1 and at most 2^64-1, computed
# exactly on the digits.
is_quantity() {
  q=$1
  negative=0
  case $q in
    +*) q=${q#+} ;;
    -*) q=${q#-} negative=1 ;;
  esac
  whole=${q%%[!0-9]*}
  q=${q#"$whole"}
  fraction=
  case $q in
    .*)
      q=${q#.}
      fraction=${q%%[!0-9]*}
      q=${q#"$fraction"}
      ;;
  esac
  [ -n "$whole$fraction" ] || return 1
  ten=0
  two=0
  case $q in
    '') ;;
    Ki) two=10 ;;
    Mi) two=20 ;;
    Gi) two=30 ;;
    Ti) two=40 ;;
    Pi) two=50 ;;
    Ei) two=60 ;;
    m) ten=-3 ;;
    k | K) ten=3 ;;
    M) ten=6 ;;
    G) ten=9 ;;
    T) ten=12 ;;
    P) ten=15 ;;
    E) ten=18 ;;
    [eE]*)
      exponent=${q#?}
      exponent_sign=
      case $exponent in
        [+-]*)
          exponent_sign=${exponent%"${exponent#?}"}
          exponent=${exponent#?}
          ;;
      esac
      case $exponent in
        '' | *[!0-9]*) return 1 ;;
      esac
      # Far past any exponent a byte count can have, and within the shell's arithmetic.
      exponent=$(strip_zeros "$exponent")
      [ "${#exponent}" -gt 7 ] && exponent=1000000
      [ "$exponent" -gt 1000000 ] && exponent=1000000
      ten=$exponent
      [ "$exponent_sign" = - ] && ten=$((-exponent))
      ;;
    *) return 1 ;;
  esac
  digits=$(strip_zeros "$whole$fraction")
  ten=$((ten - ${#fraction}))
  [ "$digits" = 0 ] && return 1 # zero, whatever its sign and suffix: not above 0
  [ "$negative" = 1 ] && return 1
  strip_trailing_zeros
  # Whole and at most 2^64-1, as the shim's parser decides before its arithmetic.
  max_digits=20
  [ "$ten" -lt 0 ] && max_digits=$((20 - ten))
  [ "$ten" -lt -60 ] && return 1
  [ "${#digits}" -gt "$max_digits" ] && return 1
  while [ "$two" -gt 0 ]; do
    double_digits
    two=$((two - 1))
  done
  strip_trailing_zeros
  [ "$ten" -lt 0 ] && return 1 # a part of a byte
  [ $((${#digits} + ten)) -gt 20 ] && return 1
  while [ "$ten" -gt 0 ]; do
    digits=${digits}0
    ten=$((ten - 1))
  done
  number_le "$digits" 18446744073709551615
}

# A percentage 1 to 100, digits only.
is_percent() {
  is_digits "$1" && number_le "$1" 100 && ! number_le "$1" 0
}

# A memory limit: a quantity, or a percentage of the device such as 25%.
is_memory_limit() {
  case $1 in
    *%) is_percent "${1%\%}" ;;
    *) is_quantity "$1" ;;
  esac
}

is_tenant() {
  case $1 in
    '' | *[!A-Za-z0-9._-]*) return 1 ;;
  esac
  [ "${#1}" -le 63 ]
}

is_absolute() {
  case $1 in
    /*) return 0 ;;
  esac
  return 1
}

# The known option nearest to a misspelt name (at most 3 edits), or nothing.
suggestion() {
  command -v awk >/dev/null 2>&1 || return 0
  printf '%s\n' "$known_options" | awk -v name="$1" '
    function distance(s, t,    i, j, m, n, d, cost) {
      m = length(s); n = length(t)
      for (i = 0; i <= m; i++) d[i, 0] = i
      for (j = 0; j <= n; j++) d[0, j] = j
      for (i = 1; i <= m; i++)
        for (j = 1; j <= n; j++) {
          cost = substr(s, i, 1) == substr(t, j, 1) ? 0 : 1
          d[i, j] = d[i - 1, j] + 1
          if (d[i, j - 1] + 1 < d[i, j]) d[i, j] = d[i, j - 1] + 1
          if (d[i - 1, j - 1] + cost < d[i, j]) d[i, j] = d[i - 1, j - 1] + cost
        }
      return d[m, n]
    }
    { for (k = 1; k <= NF; k++) { dk = distance(name, $k); if (dk < best || best == "") { best = dk; word = $k } } }
    END { if (best != "" && best < 4) print word }'
}

# Checks one GPUSLICE_* variable, as the shim would.
check_variable() {
  name=$1
  value=$2
  limit_help="a quantity above 0 (512Mi, 4Gi: powers of 1024; 4G: powers of 1000, 4000000000 bytes; 1.5Gi, 4e9: any Kubernetes quantity of whole bytes) or a percentage 1% to 100%, e.g. 4Gi"
  case $name in
    GPUSLICE_SIM_*) ;; # the simulated driver's, not the shim's
    GPUSLICE_MEMORY_LIMIT)
      is_memory_limit "$value" || error "invalid $name='$value'; expected $limit_help"
      ;;
    GPUSLICE_MEMORY_LIMIT_*)
      ordinal=${name#GPUSLICE_MEMORY_LIMIT_}
      if ! is_digits "$ordinal" || ! number_le "$ordinal" 63; then
        error "unknown variable $name='$value'; per-device limits are GPUSLICE_MEMORY_LIMIT_<n> with n a device ordinal 0 to 63, e.g. GPUSLICE_MEMORY_LIMIT_1=2Gi"
      elif ! is_memory_limit "$value"; then
        error "invalid $name='$value'; expected $limit_help"
      fi
      ;;
    GPUSLICE_MEMORY_REQUEST)
      is_memory_limit "$value" || error "invalid $name='$value'; expected $limit_help"
      ;;
    GPUSLICE_MEMORY_REQUEST_*)
      ordinal=${name#GPUSLICE_MEMORY_REQUEST_}
      if ! is_digits "$ordinal" || ! number_le "$ordinal" 63; then
        error "unknown variable $name='$value'; per-device requests are GPUSLICE_MEMORY_REQUEST_<n> with n a device ordinal 0 to 63, e.g. GPUSLICE_MEMORY_REQUEST_1=1Gi"
      elif ! is_memory_limit "$value"; then
        error "invalid $name='$value'; expected $limit_help"
      fi
      ;;
    GPUSLICE_TENANT)
      is_tenant "$value" || error "invalid $name='$value'; expected a name of 1 to 63 of A-Z a-z 0-9 . _ -, e.g. team-a.inference"
      ;;
    GPUSLICE_STATE_DIR)
      is_absolute "$value" || error "invalid $name='$value'; expected an absolute directory, e.g. /run/gpuslice"
      ;;
    GPUSLICE_COMPUTE_REQUEST | GPUSLICE_COMPUTE_LIMIT)
      is_percent "${value%\%}" || error "invalid $name='$value'; expected a percentage from 1 to 100, e.g. 30"
      ;;
    GPUSLICE_COMPUTE_CLASS)
      case $value in
        latency | standard | background) ;;
        *) error "invalid $name='$value'; expected latency, standard or background, e.g. latency" ;;
      esac
      ;;
    GPUSLICE_DRIVER_LIBRARY)
      is_absolute "$value" || error "invalid $name='$value'; expected an absolute path, e.g. /usr/lib/x86_64-linux-gnu/libcuda.so.1"
      ;;
    *)
      # A misspelt limit must not silently mean "unlimited": the shim refuses it too.
      hint=$(suggestion "$name")
      error "unknown variable $name='$value'; ${hint:+did you mean $hint? }gpuslice reads $(printf '%s' "$known_options" | sed 's/ /, /g'), e.g. GPUSLICE_MEMORY_LIMIT=4Gi"
      ;;
  esac
}

# The names meant for gpuslice but not spelt GPUSLICE_*, sorted: GPU_SLICE_* in any case,
# GPUSLICE_* in another case (gpuslice_memory_limit). The shim's rule (shim/near_miss_names.cc):
# they are refused as any misspelt GPUSLICE_* name is.
near_miss_variables() {
  env | sed -n '/^GPUSLICE_/d; s/^\([Gg][Pp][Uu]_\{0,1\}[Ss][Ll][Ii][Cc][Ee]_[A-Za-z0-9_]*\)=.*/\1/p' | sort -u
}

# The GPUSLICE_* variable a near-miss name most likely meant ("" when none is near).
near_miss_meant() {
  upper=$(printf '%s' "$1" | sed 'y/abcdefghijklmnopqrstuvwxyz/ABCDEFGHIJKLMNOPQRSTUVWXYZ/; s/^GPU_SLICE_/GPUSLICE_/')
  case " $known_options " in
    *" $upper "*)
      printf '%s' "$upper"
      return
      ;;
  esac
  case $upper in
    GPUSLICE_SIM_*) printf '%s' "$upper" ;;
    GPUSLICE_MEMORY_LIMIT_*) is_digits "${upper#GPUSLICE_MEMORY_LIMIT_}" && printf '%s' "$upper" ;;
    GPUSLICE_MEMORY_REQUEST_*) is_digits "${upper#GPUSLICE_MEMORY_REQUEST_}" && printf '%s' "$upper" ;;
    *) suggestion "$upper" ;;
  esac
}

# The names of the GPUSLICE_* variables in the environment, sorted.
gpuslice_variables() {
  # A value holding a newline could put a look-alike at the start of a line: every name is
  # confirmed to be set before it is used.
  env | sed -n 's/^\(GPUSLICE_[A-Za-z0-9_]*\)=.*/\1/p' | sort -u
}

value_of() {
  eval "printf '%s' \"\${$1-}\""
}

is_set() {
  eval "[ -n \"\${$1+set}\" ]"
}

# Whether this runs in a container (Docker, Podman, containerd, Kubernetes), where a directory of
# the container's own file system is private to it.
in_container() {
  [ -f /.dockerenv ] || [ -f /run/.containerenv ] || [ -n "${container-}" ] || [ -n "${KUBERNETES_SERVICE_HOST-}" ]
}

# The mount holding directory $1 ("mount-point fstype options"), from /proc/self/mountinfo
# (options: the mount's own, "ro" or "rw" first).
mount_of() {
  [ -r /proc/self/mountinfo ] || return 1
  real=$(cd "$1" 2>/dev/null && pwd -P) || return 1
  best=
  best_type=
  best_options=
  while read -r line; do
    # shellcheck disable=SC2086 # fields are separated by single spaces, paths escape theirs
    set -- $line
    point=$5
    options=$6
    while [ "$#" -gt 0 ] && [ "$1" != "-" ]; do shift; done
    fstype=${2-}
    case $real/ in
      "${point%/}"/*)
        if [ "${#point}" -ge "${#best}" ]; then
          best=$point
          best_type=$fstype
          best_options=$options
        fi
        ;;
    esac
  done </proc/self/mountinfo
  [ -n "$best" ] && printf '%s %s %s\n' "$best" "$best_type" "$best_options"
}

# The mount point holding directory $1 when that mount is read-only ("ro" in its options).
read_only_mount() {
  found=$(mount_of "$1") || return 1
  options=${found##* }
  case ,$options, in
    *,ro,*) printf '%s\n' "${found%% *}" ;;
    *) return 1 ;;
  esac
}

# One argument as the shell would need it written.
quote() {
  case $1 in
    '' | *[!A-Za-z0-9_./:=@%+,-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
  esac
}

# --- Arguments ------------------------------------------------------------------------------

while [ "$#" -gt 0 ]; do
  case $1 in
    --check) check=1 ;;
    --private-state) private_state=1 ;;
    --library)
      [ "$#" -ge 2 ] || {
        printf '%s: error: --library needs a path\n' "$me" >&2
        exit 2
      }
      library=$2
      library_option=--library
      shift
      ;;
    --library=*)
      library=${1#--library=}
      library_option=--library
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    --version)
      printf '%s %s\n' "$me" "$version"
      exit 0
      ;;
    --)
      shift
      break
      ;;
    -*)
      printf '%s: error: unknown option %s\n' "$me" "$1" >&2
      usage >&2
      exit 2
      ;;
    *) break ;;
  esac
  shift
done

if [ "$#" -eq 0 ] && [ "$check" -eq 0 ]; then
  printf '%s: error: no command to run\n' "$me" >&2
  usage >&2
  exit 2
fi

# --- The GPUSLICE_* variables ---------------------------------------------------------------

for name in $(gpuslice_variables); do
  is_set "$name" || continue
  check_variable "$name" "$(value_of "$name")"
done

# GPU_SLICE_MEMORY_LIMIT=4Gi would otherwise run without a limit: refused, as GPUSLICE_MEMORY_LIMT is.
for name in $(near_miss_variables); do
  is_set "$name" || continue
  meant=$(near_miss_meant "$name")
  value=$(value_of "$name")
  error "unknown variable $name='$value'; ${meant:+did you mean $meant? }gpuslice reads $(printf '%s' "$known_options" | sed 's/ /, /g'), e.g. GPUSLICE_MEMORY_LIMIT=4Gi"
done

request=${GPUSLICE_COMPUTE_REQUEST-}
limit=${GPUSLICE_COMPUTE_LIMIT-100}
request=${request%\%}
limit=${limit%\%}
if [ -n "$request" ] && is_percent "$request" && is_percent "$limit" && ! number_le "$request" "$limit"; then
  error "invalid GPUSLICE_COMPUTE_REQUEST='$GPUSLICE_COMPUTE_REQUEST' above GPUSLICE_COMPUTE_LIMIT='$limit'; the request must not exceed the limit, e.g. GPUSLICE_COMPUTE_REQUEST=30 GPUSLICE_COMPUTE_LIMIT=50"
fi

if ! is_set GPUSLICE_TENANT; then
  warn "GPUSLICE_TENANT is not set: every process of this container is a tenant of its own, with a quota of its own; set it (e.g. to the pod's name or namespace) so that they share one"
fi

# --- The state directory ---------------------------------------------------------------------

state_dir=${GPUSLICE_STATE_DIR-$state_dir_default}
state_note=
if is_absolute "$state_dir"; then
  mount_help="mount the node's shared state directory there, the same host directory in every container of the node (docker run -v /run/gpuslice:$state_dir, or a hostPath volume of type DirectoryOrCreate in Kubernetes); without it the containers' tenants cannot see one another"
  host_help="prepare it once for the group every tenant shares: sudo groupadd -f gpuslice && sudo install -d -m 2770 -o root -g gpuslice $state_dir, and add the tenants' users to the group (examples/systemd/gpuslice-tmpfiles.conf does it at every boot)"
  if [ ! -e "$state_dir" ] && in_container; then
    error "the state directory $state_dir (GPUSLICE_STATE_DIR) does not exist: $mount_help"
  elif [ ! -e "$state_dir" ]; then
    error "the state directory $state_dir (GPUSLICE_STATE_DIR) does not exist: $host_help"
  elif [ ! -d "$state_dir" ]; then
    # A file there (e.g. one the runtime mounts, such as /etc/hostname) cannot be mounted over
    # with a directory: the hint names the default place instead of this path.
    error "the state directory $state_dir (GPUSLICE_STATE_DIR) is not a directory: set GPUSLICE_STATE_DIR to a directory (default $state_dir_default) and mount the node's shared state directory there, the same host directory in every container of the node (docker run -v /run/gpuslice:$state_dir_default, or a hostPath volume of type DirectoryOrCreate in Kubernetes)"
  elif read_only=$(read_only_mount "$state_dir"); then
    error "the state directory $state_dir is on a read-only mount ($read_only): the broker writes its state file there; mount the node's directory read-write (docker run -v /run/gpuslice:$state_dir without :ro; Kubernetes: readOnly: false on the volume mount)"
  elif [ -e "$state_dir/gpuslice.state" ] && ! { [ -r "$state_dir/gpuslice.state" ] && [ -w "$state_dir/gpuslice.state" ]; }; then
    error "$state_dir/gpuslice.state is not readable and writable by uid $(id -u) (groups $(id -G)): run the container in the file's group (Kubernetes: securityContext.supplementalGroups); the node's directory wants a group shared by every tenant and mode 2770"
  elif [ ! -e "$state_dir/gpuslice.state" ] && ! { [ -w "$state_dir" ] && [ -x "$state_dir" ]; }; then
    error "the state directory $state_dir is not writable by uid $(id -u) (groups $(id -G)), and the state file is not there yet: run the container in the directory's group (Kubernetes: securityContext.supplementalGroups); the node's directory wants a group shared by every tenant and mode 2770"
  else
    state_note="exists, writable"
    if mount=$(mount_of "$state_dir"); then
      point=${mount%% *}
      fstype=${mount#* }
      fstype=${fstype%% *}
      case $fstype in
        nfs* | cifs | smb* | fuse* | 9p | ceph | glusterfs | lustre)
          error "the state directory $state_dir is on $fstype ($point): the broker's locks need a local file system of this node's kernel (tmpfs, as /run is, or a local disk)"
          ;;
      esac
      if [ "$point" = / ] && in_container && [ "$private_state" -eq 0 ]; then
        # On a host the root file system is every process's: nothing to say there.
        warn "the state directory $state_dir is on this container's own file system: only its processes share it (mount the node's directory there, or --private-state if that is meant)"
        state_note="$state_note, on the root file system ($fstype)"
      elif [ "$point" = / ]; then
        state_note="$state_note, on the root file system ($fstype)"
      else
        state_note="$state_note, on $point ($fstype)"
      fi
    fi
  fi
fi

# --- The library and LD_PRELOAD ------------------------------------------------------------

if ! is_absolute "$library"; then
  error "${library_option:+$library_option }$library is not an absolute path (LD_PRELOAD would look for it relative to each process's working directory)"
elif [ ! -f "$library" ] || [ ! -r "$library" ]; then
  error "$library is missing or unreadable: install libgpuslice.so there or name it with --library PATH"
else
  # ld.so ignores a library it cannot preload (another architecture, not a shared object, a
  # dependency missing) with a line on stderr, and runs the program without it: unlimited. A
  # trial load into env (the shim is inert until a CUDA call) finds that before COMMAND runs.
  probe=$(LD_PRELOAD=$library env 2>&1 >/dev/null)
  probe_status=$?
  case $probe in
    *"cannot be preloaded"*)
      why=$(printf '%s' "$probe" | sed -n 's/.*cannot be preloaded (\(.*\)): ignored.*/\1/p' | sed -n 1p)
      error "$library cannot be preloaded (${why:-the dynamic loader refused it}): COMMAND would run without any limit; install a libgpuslice.so built for this system there or name it with --library PATH"
      ;;
    *)
      [ "$probe_status" -eq 0 ] || error "$library cannot be preloaded: a trial run under it (LD_PRELOAD=$library env) exited with status $probe_status${probe:+: $probe}"
      ;;
  esac
fi

preload_has_library=0
old_ifs=$IFS
IFS=': '
for entry in ${LD_PRELOAD-}; do
  [ "$entry" = "$library" ] && preload_has_library=1
done
IFS=$old_ifs
if [ "$preload_has_library" -eq 1 ]; then
  new_preload=$LD_PRELOAD
else
  new_preload=${LD_PRELOAD:+$LD_PRELOAD:}$library
fi

if [ "$#" -gt 0 ] && ! command -v "$1" >/dev/null 2>&1; then
  if [ "$check" -eq 1 ] || [ "$errors" -gt 0 ]; then
    error "command not found: $1"
  else
    printf '%s: error: command not found: %s\n' "$me" "$1" >&2
    exit 127
  fi
fi

if [ "$errors" -gt 0 ]; then
  printf '%s: %d problem(s) in the configuration; nothing was run\n' "$me" "$errors" >&2
  exit 2
fi

# --- Run, or say what would be run ---------------------------------------------------------

if [ "$check" -eq 1 ]; then
  printf '%s: the configuration is valid; --check runs nothing\n' "$me"
  printf 'tenant:          %s\n' "${GPUSLICE_TENANT:-(unset: each process alone)}"
  printf 'memory request:  %s\n' "${GPUSLICE_MEMORY_REQUEST:-(unset: none guaranteed)}"
  if [ -n "${GPUSLICE_MEMORY_LIMIT-}" ]; then
    printf 'memory limit:    %s\n' "$GPUSLICE_MEMORY_LIMIT"
  elif [ -n "${GPUSLICE_MEMORY_REQUEST-}" ]; then
    printf 'memory limit:    (unset: the request)\n'
  else
    printf 'memory limit:    (unset: unlimited)\n'
  fi
  for name in $(gpuslice_variables); do
    case $name in
      GPUSLICE_MEMORY_REQUEST_*) printf 'memory request:  %s on device ordinal %s\n' "$(value_of "$name")" "${name#GPUSLICE_MEMORY_REQUEST_}" ;;
      GPUSLICE_MEMORY_LIMIT_*) printf 'memory limit:    %s on device ordinal %s\n' "$(value_of "$name")" "${name#GPUSLICE_MEMORY_LIMIT_}" ;;
    esac
  done
  printf 'compute request: %s\n' "${GPUSLICE_COMPUTE_REQUEST:-(unset: 10)}"
  printf 'compute limit:   %s\n' "${GPUSLICE_COMPUTE_LIMIT:-(unset: 100)}"
  printf 'compute class:   %s\n' "${GPUSLICE_COMPUTE_CLASS:-(unset: standard)}"
  [ -n "${GPUSLICE_DRIVER_LIBRARY-}" ] && printf 'driver library:  %s\n' "$GPUSLICE_DRIVER_LIBRARY"
  printf 'state directory: %s (%s)\n' "$state_dir" "$state_note"
  printf 'would set:       LD_PRELOAD=%s\n' "$new_preload"
  if [ "$#" -gt 0 ]; then
    printf 'would exec:     '
    for arg in "$@"; do printf ' %s' "$(quote "$arg")"; done
    printf '\n'
  else
    printf 'would exec:      (no command given)\n'
  fi
  exit 0
fi

LD_PRELOAD=$new_preload
export LD_PRELOAD
exec "$@"
