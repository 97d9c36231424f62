#!/usr/bin/env python3
"""scikit-learn's digits (1,797 8 x 8 images, 64 pixels of 0 to 16; bundled,
no download) as an (N, 64) float32 .npy file in scikit-learn's order, for
kmt-train --data and kmt-eval --data: the pixels as they are, the learned
model's own input map doing the scaling.

    bench/digits_data.py FILE.npy
"""
import sys

import numpy as np
from sklearn import datasets


def main():
    x = datasets.load_digits().data.astype(np.float32)
    np.save(sys.argv[1], x)
    print(f"{sys.argv[1]}: {x.shape[0]} x {x.shape[1]}")


if __name__ == "__main__":
    main()
