"""What the rapid* libraries need from us: BGR pixels, and their INFO logs kept quiet."""

from __future__ import annotations

import contextlib
import logging

import numpy as np


@contextlib.contextmanager
def info_held_back():
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def quiet(prefix: str) -> None:
    """rapid* give each module its own INFO logger; only their warnings belong in our logs."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(prefix):
            logging.getLogger(name).setLevel(logging.WARNING)


def as_bgr(image: np.ndarray) -> np.ndarray:
    """Our page images are RGB; rapid* read ndarrays as OpenCV BGR, so flip the channels."""
    if image.ndim == 2:
        return np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[:, :, 2::-1])
