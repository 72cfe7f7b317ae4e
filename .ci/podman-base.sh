# Sourced by .ci/images.sh and .ci/gpu-topology.sh: podman and its tools, and the Debian base image
# every target builds on, made once per machine without a container registry. The caller defines
# say() and die().

podman_tools() {  # work dir: apt's log and podman's containers.conf go there
  local work=$1 need=() tool
  for tool in podman buildah runc debootstrap docker-compose curl; do command -v "$tool" >/dev/null || need+=("$tool"); done
  if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "missing ${need[*]}; install as root: apt-get install podman buildah runc debootstrap docker-compose"
    say "installing ${need[*]} (apt)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >"$work/apt.log" 2>&1 \
      || die "apt-get install failed, see $work/apt.log"
  fi
  # podman's default OCI runtime (crun) fails on this machine kind; runc works with explicit ulimits.
  cat >"$work/containers.conf" <<'CONF'
[engine]
runtime = "runc"
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]
CONF
  export CONTAINERS_CONF="$work/containers.conf"
}

podman_base_image() {  # image name, cache dir of the base tarball
  local image=$1 cache=$2 mirror
  podman image exists "$image" && return 0
  if [ ! -s "$cache/base-bookworm.tar" ]; then
    # Either file may be absent (deb822-only machines have no sources.list): grep's status must
    # not end the script under pipefail.
    mirror=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources || true
      grep -hs '^deb ' /etc/apt/sources.list | awk '{print "URIs: " $2}' || true; } \
      | awk '{print $2}' | { grep -v security || true; } | head -n1)
    say "debootstrap bookworm from ${mirror:=http://deb.debian.org/debian}"
    rm -rf "$cache/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$cache/rootfs" "$mirror" \
      >"$cache/debootstrap.log" 2>&1 || die "debootstrap failed, see $cache/debootstrap.log"
    tar -C "$cache/rootfs" -cf "$cache/base-bookworm.tar.tmp" . && mv "$cache/base-bookworm.tar.tmp" "$cache/base-bookworm.tar"
    rm -rf "$cache/rootfs"
  fi
  say "importing the base image"
  podman import "$cache/base-bookworm.tar" "$image" >/dev/null
}
