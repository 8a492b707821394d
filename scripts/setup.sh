#!/usr/bin/env bash
# Installs the Debian packages actorps needs. Idempotent and quiet when
# everything is already installed. Run as root (or with sudo available).
#
#   scripts/setup.sh --build  what building actorps and training the
#                             quick start's job need (no test tools)
#   scripts/setup.sh          that, and what the tests need (the corpus
#                             replay of fuzz/ included: it builds with g++),
#                             and ONNX Runtime's npm package in
#                             /opt/actorps-node (the export's runtime check)
#   scripts/setup.sh --fuzz   also clang and libFuzzer, for scripts/fuzz.sh
set -euo pipefail

# The build: compiler and CMake, the libraries (CMake finds Catch2 and
# Google Benchmark at configure time too: both are small), Fashion-MNIST.
# libssl-dev: mutual TLS between nodes (cluster/net/tls.hpp, actorps certs);
# prometheus-cpp-dev: the metrics endpoint (--metrics-port); libonnx-dev and
# libprotobuf-dev: actorps export writes ONNX (models/export/).
packages=(cmake g++ libcaf-dev libeigen3-dev nlohmann-json3-dev catch2 libfmt-dev
          libbenchmark-dev zlib1g-dev libcsv-dev libabsl-dev libssl-dev
          prometheus-cpp-dev libcpp-httplib-dev libonnx-dev libprotobuf-dev
          dataset-fashion-mnist)
if [[ ${1:-} != --build ]]; then
  # r-cran-dslabs: MovieLens (scripts/export_movielens.sh); gnuplot-nox:
  # --plot; curl and jq: the tests that scrape the endpoint and read
  # metrics; openssl: the command-line tool test/tls_test.sh checks
  # certificates with (openssl verify, s_client, an expired certificate).
  packages+=(r-cran-dslabs gnuplot-nox curl jq openssl)
  # slurm-wlm (slurmctld, slurmd, srun, ...) and munge: test/slurm_test.sh
  # starts a one-node Slurm cluster of its own (docs/guide/slurm.md).
  packages+=(slurm-wlm munge)
  # iproute2 (ip, tc): scripts/netns-cluster.sh and test/netns_test.sh, a
  # cluster in network namespaces joined by veth pairs and a bridge (not in
  # a minimal Debian image; setpriv and unshare come with util-linux).
  packages+=(iproute2)
  # python3-yaml: test/tools/k8s_pods.py reads the Kubernetes manifests of
  # deploy/k8s/ to start their pods here (test/k8s_test.sh).
  packages+=(python3 python3-yaml)
  # python3-onnx: onnx.checker on the exported models
  # (test/export_runtime_test.sh); Node.js and npm for ONNX Runtime's
  # package (below), unless a node with npm is installed already.
  packages+=(python3-onnx)
  command -v npm >/dev/null || packages+=(nodejs npm)
fi
if [[ ${1:-} == --fuzz ]]; then
  # clang 14 with its runtime libraries (libFuzzer, the sanitizers).
  packages+=(clang-14 libclang-rt-14-dev clang)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

sudo=""
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then
  sudo=sudo
fi
if ((${#missing[@]} > 0)); then
  if [[ $(id -u) -ne 0 && -z $sudo ]]; then
    echo "setup.sh: run as root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ONNX Runtime for Node.js (npm onnxruntime-node, which ships its CPU
# library), the independent runtime test/export_runtime_test.sh runs the
# exported models with, in a folder of its own outside the repository. Its
# install script would fetch the CUDA build from GitHub: skipped. Without
# the npm registry the test says so and is skipped (77); setup goes on.
ort_dir=/opt/actorps-node
ort_version=1.20.1
if [[ ${1:-} != --build && ! -f $ort_dir/node_modules/onnxruntime-node/package.json ]]; then
  echo "setup.sh: installing onnxruntime-node $ort_version into $ort_dir (npm)" >&2
  if ! { $sudo mkdir -p "$ort_dir" \
         && $sudo npm install --prefix "$ort_dir" --no-audit --no-fund \
              --onnxruntime-node-install-cuda=skip \
              "onnxruntime-node@$ort_version" >/dev/null; }; then
    echo "setup.sh: warning: npm could not install onnxruntime-node; the" \
         "test export.onnx_runtime_agrees will be skipped" >&2
  fi
fi
exit 0
