"""Offline datasets: scikit-learn's bundled sets, never downloaded.

These stand in for the seeds' datasets we cannot fetch offline (MNIST, USPS).
Loaders return numpy arrays; convert with ``jnp.asarray(..., dtype)`` as needed.
"""
from typing import NamedTuple

import numpy as np


class Split(NamedTuple):
    train: np.ndarray
    test: np.ndarray


class Classification(NamedTuple):
    inputs: np.ndarray  # (n, d) standardized features
    labels: np.ndarray  # (n,) int


def _sklearn_datasets():
    try:
        from sklearn import datasets
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError("jaxz.data needs scikit-learn: pip install 'jaxz[test]' or scikit-learn") from error
    return datasets


def breast_cancer(*, intercept: bool = True) -> Classification:
    """Wisconsin breast-cancer data (569 × 30), features standardized to zero mean and
    unit variance; with ``intercept`` a column of ones is prepended (569 × 31).
    Labels as scikit-learn codes them: 0 malignant, 1 benign."""
    data = _sklearn_datasets().load_breast_cancer()
    inputs = (data.data - data.data.mean(0)) / data.data.std(0)
    if intercept:
        inputs = np.concatenate([np.ones((inputs.shape[0], 1)), inputs], axis=1)
    return Classification(inputs, data.target.astype(np.int32))


def digits_binarized(*, threshold: int = 8, test_fraction: float = 0.2, seed: int = 0) -> Split:
    """scikit-learn's 8×8 handwritten digits (1,797 images, 64 visible units) binarized:
    a pixel is 1 when its intensity (0–16) is >= ``threshold`` (default 8, half range).
    A fixed shuffled split (``seed``) leaves ``test_fraction`` of the images for testing.
    Stands in for binarized MNIST, which cannot be fetched offline."""
    images = _sklearn_datasets().load_digits().data
    binary = (images >= threshold).astype(np.float32)
    order = np.random.RandomState(seed).permutation(binary.shape[0])
    num_test = int(round(test_fraction * binary.shape[0]))
    return Split(binary[order[num_test:]], binary[order[:num_test]])


def digits_labels(*, seed: int = 0, test_fraction: float = 0.2) -> Split:
    """The digit labels (0–9) in the same split as ``digits_binarized``."""
    labels = _sklearn_datasets().load_digits().target.astype(np.int32)
    order = np.random.RandomState(seed).permutation(labels.shape[0])
    num_test = int(round(test_fraction * labels.shape[0]))
    return Split(labels[order[num_test:]], labels[order[:num_test]])


def digits_3_vs_5() -> Classification:
    """The 3s and 5s of scikit-learn's 8×8 digits (183 + 182 = 365 images, 64 pixels),
    intensities 0–16 scaled to [−1, 1], labels +1 for a 3 and −1 for a 5, in the data
    set's order. Stands in for the USPS 3-vs-5 set of Kuss & Rasmussen (2005)
    (16×16 pixels in [−1, 1]), which cannot be fetched offline."""
    digits = _sklearn_datasets().load_digits()
    keep = (digits.target == 3) | (digits.target == 5)
    inputs = digits.data[keep] / 8.0 - 1.0
    labels = np.where(digits.target[keep] == 3, 1, -1).astype(np.int32)
    return Classification(inputs, labels)


def shared_file(name: str) -> str:
    """The path of a reference data file from the papers' authors (``shared/data`` of the
    project: ``ising16_lindsten2018.npz``, ``germany_adjacency.txt``, ...): the folder in
    ``$JAXZ_DATA_DIR`` if set, else ``shared/data`` inside or beside the checkout. Never
    downloads; a clear FileNotFoundError names where it looked."""
    import os

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folders = [os.environ.get("JAXZ_DATA_DIR", ""), os.path.join(repo, "shared", "data"),
               os.path.join(repo, "..", "shared", "data"), os.path.join(repo, "..", "..", "shared", "data")]
    for folder in folders:
        if folder and os.path.exists(os.path.join(folder, name)):
            return os.path.normpath(os.path.join(folder, name))
    raise FileNotFoundError(f"{name} not found in {[f for f in folders if f]}; set JAXZ_DATA_DIR to the folder "
                            "that holds it")
