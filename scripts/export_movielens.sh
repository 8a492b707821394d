#!/usr/bin/env bash
# Exports the `movielens` data frame of Debian's r-cran-dslabs (100,004
# ratings of the MovieLens "latest-small" sample) once to a CSV file that the
# `movielens` dataset (core/movielens.hpp) reads:
#
#   scripts/export_movielens.sh [DIR]    # default DIR: data/movielens
#
# DIR is relative to the repository root unless absolute. Writes
# DIR/movielens.csv atomically (a temporary file in DIR, then a rename), with
# the columns movieId,title,year,genres,userId,rating,timestamp; missing
# values are written as NA. Prints the path it wrote. Needs Rscript and
# r-cran-dslabs (scripts/setup.sh installs them).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-data/movielens}
[[ $dir = /* ]] || dir="$root/$dir"

command -v Rscript >/dev/null || {
  echo "export_movielens.sh: Rscript not found: run scripts/setup.sh (installs r-cran-dslabs)" >&2
  exit 1
}

mkdir -p "$dir"
out="$dir/movielens.csv"
tmp=$(mktemp "$dir/.movielens.csv.XXXXXX")
trap 'rm -f "$tmp"' EXIT

Rscript --vanilla -e '
  args <- commandArgs(trailingOnly = TRUE)
  suppressPackageStartupMessages(library(dslabs))
  data(movielens, envir = environment())
  cols <- c("movieId", "title", "year", "genres", "userId", "rating", "timestamp")
  utils::write.csv(movielens[, cols], args[1], row.names = FALSE, na = "NA",
                   fileEncoding = "UTF-8")
' "$tmp" || {
  echo "export_movielens.sh: Rscript failed; is r-cran-dslabs installed? (scripts/setup.sh installs it)" >&2
  exit 1
}

chmod 644 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT
echo "$out"
