#!/usr/bin/env python3
"""A dataset bundled with Debian's scikit-learn (no download) as an (N, d)
float32 .npy file in scikit-learn's order, for kmt-train --data and
kmt-eval --data:

  digits:         1,797 8 x 8 images, 64 pixels of 0 to 16, as they are
                  (the learned model's own input map does the scaling);
  breast_cancer:  569 tumours, 30 measurements of unlike units (areas in
                  the thousands, smoothness below 0.2), each standardised
                  to mean 0 and variance 1, since one min-max map for all
                  of them would flatten the small ones.

    bench/sklearn_data.py digits FILE.npy
"""
import sys

import numpy as np
from sklearn import datasets


def main():
    name, path = sys.argv[1], sys.argv[2]
    if name == "digits":
        x = datasets.load_digits().data
    elif name == "breast_cancer":
        x = datasets.load_breast_cancer().data
        x = (x - x.mean(axis=0)) / x.std(axis=0)
    else:
        sys.exit(f"unknown dataset {name}: digits or breast_cancer")
    x = x.astype(np.float32)
    np.save(path, x)
    print(f"{path}: {name}, {x.shape[0]} x {x.shape[1]}")


if __name__ == "__main__":
    main()
