"""Unit length, the one way: every vector brain compares by cosine is scaled here.

A zero vector (L2 norm below :data:`ZERO_NORM`) has no direction. :func:`unit_rows` returns it as all
zeros, so its cosine with anything is 0 and a score built on it is never NaN. Whether a zero vector is
acceptable at all is the caller's decision (an embedder's output or a query must not be one:
:func:`zero_rows` finds them); non-finite values are the caller's to refuse first (what comes back for
them means nothing).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: a vector whose L2 norm is below this is a zero vector (no real embedding comes near it)
ZERO_NORM = 1e-12


def unit_rows(vectors: npt.ArrayLike, dtype: npt.DTypeLike = np.float32) -> np.ndarray:
    """``vectors`` (one vector, or a matrix of row vectors) scaled to unit length along the last axis,
    computed and returned as ``dtype`` (C-contiguous). A zero vector comes back all zeros."""
    x = np.asarray(vectors, dtype=dtype)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    unit: np.ndarray = np.divide(x, norms, out=np.zeros_like(x, order="C"), where=norms >= ZERO_NORM)
    return unit


def zero_rows(vectors: npt.ArrayLike, dtype: npt.DTypeLike = np.float32) -> np.ndarray:
    """Which of ``vectors`` (rows, or one vector: a 0-d answer) are zero vectors: the ones :func:`unit_rows`
    leaves at zero when given the same ``dtype``."""
    norms: np.ndarray = np.linalg.norm(np.asarray(vectors, dtype=dtype), axis=-1)
    return norms < ZERO_NORM
