#!/usr/bin/env python3
"""The MovieLens job of configs/movielens.json in PyTorch, one process: the
reference actorps is compared with.

Same data and split as core/movielens.cpp (the export of scripts/
export_movielens.sh; label: rating >= 4; each user's last round(0.2 n) ratings
by timestamp, ties by movie id, are the test rows), same model (one embedding
table of dim 16 per field: user, movie, genres (multi-hot, mean), year;
concatenated -> 64-64-32-1 ReLU MLP -> sigmoid, binary cross-entropy), same
rules (sparse Adagrad lr 0.05 on the tables, Adam lr 0.001 on the MLP), batch
256, shuffled each epoch. Prints per epoch: test AUC, test log loss, training
samples/s (training time only, as actorps reports it).

usage: python3 bench/pytorch_movielens.py [CSV] [--epochs N] [--threads N]
Needs Debian's python3-torch and python3-numpy.
"""

import argparse
import csv
import time

import numpy as np
import torch
import torch.nn as nn


def load(path):
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for r in reader:
            year = r["year"]
            rows.append((int(r["userId"]), int(r["movieId"]), r["genres"],
                         int(year) if year not in ("", "NA") else 0,
                         float(r["rating"]), int(r["timestamp"])))
    genres = sorted({g for r in rows for g in r[2].split("|")})
    gid = {g: i for i, g in enumerate(genres)}
    by_user = {}
    for i, r in enumerate(rows):
        by_user.setdefault(r[0], []).append(i)
    test = set()
    for u, idx in by_user.items():
        idx.sort(key=lambda i: (rows[i][5], rows[i][1], i))
        n = len(idx)
        k = max(1, int(0.2 * n + 0.5))
        test.update(idx[n - k:])
    vocab = (max(r[0] for r in rows) + 1, max(r[1] for r in rows) + 1,
             len(genres), max(r[3] for r in rows) + 1)

    def tensors(sel):
        user = torch.tensor([rows[i][0] for i in sel])
        movie = torch.tensor([rows[i][1] for i in sel])
        year = torch.tensor([rows[i][3] for i in sel])
        label = torch.tensor([1.0 if rows[i][4] >= 4 else 0.0 for i in sel])
        g = [[gid[x] for x in rows[i][2].split("|")] for i in sel]
        return user, movie, g, year, label

    train = [i for i in range(len(rows)) if i not in test]
    return tensors(train), tensors(sorted(test)), vocab


def genre_batch(g, sel):
    flat, offsets = [], []
    for i in sel:
        offsets.append(len(flat))
        flat.extend(g[i])
    return torch.tensor(flat), torch.tensor(offsets)


class Model(nn.Module):
    def __init__(self, vocab, dim=16):
        super().__init__()
        self.user = nn.Embedding(vocab[0], dim, sparse=True)
        self.movie = nn.Embedding(vocab[1], dim, sparse=True)
        self.genres = nn.EmbeddingBag(vocab[2], dim, mode="mean", sparse=True)
        self.year = nn.Embedding(vocab[3], dim, sparse=True)
        for e in (self.user, self.movie, self.genres, self.year):
            nn.init.uniform_(e.weight, -0.05, 0.05)
        self.mlp = nn.Sequential(nn.Linear(4 * dim, 64), nn.ReLU(),
                                 nn.Linear(64, 32), nn.ReLU(),
                                 nn.Linear(32, 1))

    def forward(self, user, movie, gflat, goff, year):
        x = torch.cat([self.user(user), self.movie(movie),
                       self.genres(gflat, goff), self.year(year)], dim=1)
        return self.mlp(x).squeeze(1)


def auc(scores, labels):
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    pos = labels[order] == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default="data/movielens/movielens.csv")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train, test, vocab = load(args.csv)
    model = Model(vocab)
    tables = [p for n, p in model.named_parameters() if not n.startswith("mlp")]
    sparse_opt = torch.optim.Adagrad(tables, lr=0.05,
                                     initial_accumulator_value=1e-4)
    dense_opt = torch.optim.Adam(model.mlp.parameters(), lr=0.001)
    loss_fn = nn.BCEWithLogitsLoss()
    n = len(train[4])
    batch = 256
    gflat_t, goff_t = genre_batch(test[2], range(len(test[4])))
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(n)
        t0 = time.perf_counter()
        seen = 0
        for b in range(0, n - batch + 1, batch):
            sel = perm[b:b + batch]
            gflat, goff = genre_batch(train[2], sel.tolist())
            logit = model(train[0][sel], train[1][sel], gflat, goff,
                          train[3][sel])
            loss = loss_fn(logit, train[4][sel])
            sparse_opt.zero_grad()
            dense_opt.zero_grad()
            loss.backward()
            sparse_opt.step()
            dense_opt.step()
            seen += batch
        dt = time.perf_counter() - t0
        with torch.no_grad():
            z = model(test[0], test[1], gflat_t, goff_t, test[3])
            test_loss = loss_fn(z, test[4]).item()
            a = auc(z.numpy(), test[4].numpy())
        print(f"epoch {epoch}/{args.epochs}  test_auc {a:.4f}  test_loss "
              f"{test_loss:.4f}  samples/s {seen / dt:.0f}", flush=True)


if __name__ == "__main__":
    main()
