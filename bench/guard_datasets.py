#!/usr/bin/env python3
"""scikit-learn's bundled datasets (no download) as (N, 32) float32 .npy
files for kmt-eval --data: iris (4 features), wine (13) and breast cancer
(30) zero-padded to 32 dimensions, which leaves their k-means problems as
they are; digits (64) reduced to its first 32 principal components. The
features keep their own units, unequal scales included, as a user would
send them.

    bench/guard_datasets.py DIR
"""
import pathlib
import sys

import numpy as np
from sklearn import datasets
from sklearn.decomposition import PCA

D = 32


def to_d(x):
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1] > D:
        return PCA(n_components=D, random_state=0).fit_transform(x)
    return np.hstack([x, np.zeros((x.shape[0], D - x.shape[1]))])


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, load in (("iris", datasets.load_iris), ("wine", datasets.load_wine),
                       ("breast_cancer", datasets.load_breast_cancer),
                       ("digits", datasets.load_digits)):
        x = to_d(load().data).astype(np.float32)
        np.save(out / f"{name}.npy", x)
        print(f"{out / name}.npy: {x.shape[0]} x {x.shape[1]}")


if __name__ == "__main__":
    main()
