#!/usr/bin/env bash
# Build bench/ns3/icc2006 (qosnet's ns-3 model of the ICC 2006 testbed)
# against Debian's ns-3 (apt-get install libns3-dev pkg-config g++).
#
#   bench/ns3/build.sh            # -> bench/ns3/build/icc2006
#
# Flags come from pkg-config (ns3-core, ns3-network, ns3-internet,
# ns3-point-to-point). Debian 12's ns3 .pc files carry two defects that are
# filtered out here: a stray "-I/usr;" token, and absolute paths to
# libgsl.so/libgslcblas.so, which only exist with libgsl-dev installed (the
# ns-3 libraries already link GSL themselves, so they are not needed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/build"
mods="ns3-core ns3-network ns3-internet ns3-point-to-point"

if ! pkg-config --exists $mods 2>/dev/null; then
    echo "build.sh: ns-3 development files not found; install them with" >&2
    echo "  apt-get install libns3-dev pkg-config g++" >&2
    exit 1
fi

flags=()
for tok in $(pkg-config --cflags --libs $mods); do
    case "$tok" in
        *\;*) continue ;;                           # "-I/usr;": not a flag
        /*.so) [ -e "$tok" ] || continue ;;         # missing optional .so
    esac
    flags+=("$tok")
done

mkdir -p "$out"
# -O2 like Debian's build of ns-3 itself; NDEBUG: no asserts in our code.
set -x
${CXX:-g++} -std=c++17 -O2 -DNDEBUG -Wall -Wextra -Wno-unused-parameter \
    -o "$out/icc2006" "$here/icc2006.cc" "${flags[@]}"
