#!/usr/bin/env bash
# Installs the Debian packages actorps needs. Idempotent and quiet when
# everything is already installed. Run as root (or with sudo available).
#
#   scripts/setup.sh --build  what building actorps and training the
#                             quick start's job need (no test tools)
#   scripts/setup.sh          that, and what the tests need (the corpus
#                             replay of fuzz/ included: it builds with g++)
#   scripts/setup.sh --fuzz   also clang and libFuzzer, for scripts/fuzz.sh
set -euo pipefail

# The build: compiler and CMake, the libraries (CMake finds Catch2 and
# Google Benchmark at configure time too: both are small), Fashion-MNIST.
# libssl-dev: mutual TLS between nodes (cluster/net/tls.hpp, actorps certs);
# prometheus-cpp-dev: the metrics endpoint (--metrics-port).
packages=(cmake g++ libcaf-dev libeigen3-dev nlohmann-json3-dev catch2 libfmt-dev
          libbenchmark-dev zlib1g-dev libcsv-dev libabsl-dev libssl-dev
          prometheus-cpp-dev libcpp-httplib-dev dataset-fashion-mnist)
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
((${#missing[@]} == 0)) && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup.sh: run as root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
