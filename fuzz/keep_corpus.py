#!/usr/bin/env python3
"""Keeps a few of a fuzzing campaign's inputs in the repository corpus.

    fuzz/keep_corpus.py [--build build-fuzz] [--cap 25] TARGET...

For each TARGET, runs libFuzzer's merge (fuzz_TARGET -merge=1) of the
campaign's working corpus (BUILD/corpus/TARGET, see scripts/fuzz.sh) over a
copy of fuzz/corpus/TARGET, reads from its control file how many features
each new input brings beyond the repository corpus (libFuzzer credits them
smallest input first), and copies the CAP inputs that bring the most, each
at most 4 KiB, into fuzz/corpus/TARGET; never more than 45 files in all per
target. The ctest replay (fuzz.replay.TARGET) then runs them. Nothing is
removed from fuzz/corpus.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

MAX_SIZE = 4096
MAX_FILES = 45


def keep(root, build, target, cap):
    repo = os.path.join(root, 'fuzz', 'corpus', target)
    campaign = os.path.join(build, 'corpus', target)
    fuzzer = os.path.join(build, 'fuzz', 'fuzz_' + target)
    if not os.path.isdir(campaign) or not os.access(fuzzer, os.X_OK):
        sys.exit(f'keep_corpus: no {campaign} or {fuzzer} (run scripts/fuzz.sh)')
    have = len(os.listdir(repo))
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, 'out')
        shutil.copytree(repo, out)
        ctl = os.path.join(work, 'control')
        subprocess.run([fuzzer, '-merge=1', '-timeout=10', '-rss_limit_mb=2048',
                        '-merge_control_file=' + ctl, out, campaign],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Control file: file count, count of the first corpus (the copy of
        # the repository's), the paths, then "FT index features..." lines.
        lines = open(ctl).read().split('\n')
        n, first = int(lines[0]), int(lines[1])
        files = lines[2:2 + n]
        gain = {}
        for line in lines[2 + n:]:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == 'FT':
                gain[int(parts[1])] = len(parts) - 2
        candidates = sorted(((g, i) for i, g in gain.items()
                             if i >= first and g > 0
                             and os.path.getsize(files[i]) <= MAX_SIZE),
                            reverse=True)
        added = 0
        for _, i in candidates[:max(0, min(cap, MAX_FILES - have))]:
            dest = os.path.join(repo, os.path.basename(files[i]))
            if not os.path.exists(dest):
                shutil.copy(files[i], dest)
                added += 1
    print(f'{target}: {have} files, {len(candidates)} inputs with new '
          f'features, {added} kept')


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--build', default='build-fuzz')
    p.add_argument('--cap', type=int, default=25)
    p.add_argument('targets', nargs='+')
    a = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.abspath(a.build)
    for t in a.targets:
        keep(root, build, t, a.cap)


if __name__ == '__main__':
    main()
