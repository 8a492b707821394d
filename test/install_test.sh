#!/usr/bin/env bash
# The installed package: `cmake --install BUILD --prefix P` into a temporary
# prefix, then apps/examples configured and built as a separate CMake project
# against it (find_package(actorps), actorps::actorps) and each example run
# and checked with examples_test.sh (its loss falls).
#
#   test/install_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=${1:?usage: install_test.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: install_test.sh BUILD_DIR SOURCE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; failed=1; }

prefix=$tmp/prefix
if cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  ok "installed into a temporary prefix"
else
  bad "cmake --install: $(tail -5 "$tmp/install.log")"
  exit 1
fi
for f in include/actorps/core/job_config.hpp include/actorps/models/registry.hpp \
         include/actorps/actors/messages.hpp include/actorps/cluster/services/fit.hpp \
         include/actorps/cluster/net/data_link.hpp \
         lib/libactorps_core.a lib/libactorps_actors.a bin/actorps \
         lib/libactorps_cluster_{spec,net,job,services,topology,launch,sim}.a \
         lib/cmake/actorps/actorpsConfig.cmake \
         lib/cmake/actorps/actorpsConfigVersion.cmake \
         lib/cmake/actorps/actorpsTargets.cmake; do
  [[ -e $prefix/$f ]] || bad "not installed: $f"
done
[[ $failed -eq 0 ]] && ok "headers under include/actorps/<layer>, cluster/ by room, libraries (one per layer, cluster/ one per room), config"

# The examples as a project of their own: nothing of the source or build
# tree may be on their include path, only the prefix.
if cmake -S "$src/apps/examples" -B "$tmp/examples" -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
     >"$tmp/configure.log" 2>&1; then
  ok "find_package(actorps) found the installed package"
else
  bad "configuring apps/examples: $(tail -8 "$tmp/configure.log")"
  exit 1
fi
leaks=$(grep -o -- '-I[^ "]*\|-isystem [^ "]*' "$tmp/examples/compile_commands.json" \
        | grep -e "$src" -e "$build" | sort -u)
[[ -z $leaks ]] || bad "include paths into the source or build tree: $leaks"
if cmake --build "$tmp/examples" -j2 >"$tmp/build.log" 2>&1; then
  ok "the examples built against the installed package"
else
  bad "building apps/examples: $(grep -m5 -E 'error|Error' "$tmp/build.log")"
  exit 1
fi
for example in custom_loop custom_model custom_step custom_rule; do
  bash "$src/test/examples_test.sh" "$tmp/examples/$example" || failed=1
done
exit $failed
