"""``tilegrad.torch.checkpoint``: training checkpoints that are never half written, never hold a
diverged run, and are read without unpickling code.

    from tilegrad.torch import checkpoint
    checkpoint.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, "run/ckpt.pt")
    state = checkpoint.load("run/ckpt.pt", required=("model", "optimizer", "step"))

``save`` is ``torch.save`` into a temporary file beside the target, renamed over it once complete:
an interruption leaves the previous checkpoint intact. It refuses a state holding a NaN or an
infinity (a run that diverged), so the last good checkpoint is never replaced by a broken one.
``load`` is ``torch.load(weights_only=True)`` onto the CPU: a missing, empty, damaged or foreign
file raises one ``ValueError`` naming the file and what is wrong with it, never torch's advice to
unpickle an untrusted file with ``weights_only=False``.
"""

import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Tuple, Union

import torch

__all__ = ["save", "load"]

PathLike = Union[str, "os.PathLike[str]"]


def _tensors(value: Any, key: str = "") -> Iterator[Tuple[str, torch.Tensor]]:
    """(dotted key, tensor) of every tensor inside nested dicts, lists and tuples."""
    if isinstance(value, torch.Tensor):
        yield key, value
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _tensors(item, f"{key}.{name}" if key else str(name))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{key}[{index}]")


def _first_non_finite(state: Any):
    """The key of the first floating-point tensor holding a NaN or an infinity, or None."""
    for key, tensor in _tensors(state):
        if (tensor.is_floating_point() or tensor.is_complex()) and not bool(torch.isfinite(tensor).all()):
            return key
    return None


def save(state: Mapping[str, Any], path: PathLike) -> None:
    """Writes ``state`` (a dict of tensors, state dicts and plain values) to ``path`` atomically.

    Args:
        state: what ``torch.save`` takes; every floating-point tensor in it must be finite.
        path: the file; its folder must exist.

    Raises:
        TypeError: ``state`` is not a mapping.
        ValueError: a tensor in ``state`` holds a NaN or an infinity (named by its key); nothing is
            written and an existing file at ``path`` is left as it was.
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"tilegrad.torch.checkpoint.save: state must be a dict, got {type(state).__name__}")
    broken = _first_non_finite(state)
    if broken is not None:
        raise ValueError(f"tilegrad.torch.checkpoint.save: state[{broken!r}] holds non-finite values (the run "
                         f"diverged?); {path} not written")
    path = Path(path)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(dict(state), partial)
        os.replace(partial, path)  # the rename is atomic: readers see the old file or the new one
    finally:
        partial.unlink(missing_ok=True)


def load(path: PathLike, required: Iterable[str] = ()) -> dict:
    """The dict saved at ``path`` (by ``save`` or ``torch.save``), tensors on the CPU.

    Args:
        path: the checkpoint file.
        required: keys the dict must hold (e.g. ``("model", "optimizer")``).

    Raises:
        ValueError: ``path`` does not exist, is empty, cannot be read by ``torch.load(weights_only=True)``
            (damaged, or holding arbitrary Python objects), is not a dict or lacks a required key; the
            message names the file and the reason.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"tilegrad.torch.checkpoint.load: {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 (a damaged file fails in many ways: one answer)
        why = "an empty file" if path.stat().st_size == 0 else f"torch.load failed with {type(error).__name__}"
        raise ValueError(f"tilegrad.torch.checkpoint.load: {path} cannot be read ({why})") from None
    missing = [key for key in required if not isinstance(state, dict) or key not in state]
    if missing:
        raise ValueError(f"tilegrad.torch.checkpoint.load: {path} is not the checkpoint expected (no "
                         f"{', '.join(map(repr, missing))})")
    return state
