"""One-line adoption: switch an existing model, or torch.nn.functional as a whole, to tilegrad.

    import tilegrad.torch as tgt
    summary = tgt.patch(model)    # in place; prints as a table of what was replaced
    tgt.unpatch(model)            # exactly the original modules and forward again
    tgt.enable()                  # torch.nn.functional.silu/cross_entropy/... -> tilegrad, process-wide
    tgt.disable()                 # torch's functions again

``patch`` changes the *class* of each supported module (``module.__class__``) to tilegrad's subclass
of the same torch class, so the module object, its Parameter objects, hooks, ``state_dict`` and any
optimizer built on ``model.parameters()`` are untouched. Only modules whose type is exactly the torch
class are switched (a user subclass may override ``forward``).

With Hugging Face ``transformers`` loaded, ``patch`` also handles the causal LMs listed in
``CAUSAL_LM_FACTS``: their SiLU activation modules (``transformers.activations.SiLUActivation``), the
token embedding (a plain ``torch.nn.Embedding``), and the training loss, which is computed as a fused
linear cross entropy from the final hidden states (as Liger-Kernel does) so the ``(tokens, vocab)``
logits never exist whole: in training mode with ``labels``, the output has the loss and
``logits=None``. Without labels, in eval mode, or with options the fused path does not cover, the
model's own forward runs unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.nn import functional as F

from . import functional as TF
from . import nn as tnn

__all__ = ["patch", "unpatch", "enable", "disable", "is_enabled", "PatchSummary", "Replacement", "CAUSAL_LM_FACTS"]

_RECORDS_ATTR = "_tilegrad_patch_records"


# ----------------------------------------------------------------------------------------------
# per-model facts


@dataclasses.dataclass(frozen=True)
class CausalLMFacts:
    """Where a Hugging Face causal LM keeps the parts the fused loss needs.

    ``decoder``: attribute holding the base model (returns ``last_hidden_state``); ``lm_head``:
    attribute holding the output ``nn.Linear``. All listed models share transformers' standard
    causal-LM forward (``self.model`` -> ``slice_logits_to_keep`` -> ``self.lm_head`` ->
    ``self.loss_function``), checked by the tests against each model's own forward.
    """

    decoder: str = "model"
    lm_head: str = "lm_head"


# keyed by ``config.model_type``; every entry is exercised by tests/torch/test_patch.py
CAUSAL_LM_FACTS: Dict[str, CausalLMFacts] = {
    "llama": CausalLMFacts(),
    "mistral": CausalLMFacts(),
    "qwen2": CausalLMFacts(),
    "qwen3": CausalLMFacts(),
}

# the leading parameters of transformers' causal-LM forward, in order (checked before patching)
_CAUSAL_LM_PARAMETERS = ("input_ids", "attention_mask", "position_ids", "past_key_values", "inputs_embeds",
                         "labels", "use_cache", "logits_to_keep")


# ----------------------------------------------------------------------------------------------
# summary


@dataclasses.dataclass(frozen=True)
class Replacement:
    """One change made by :func:`patch`: module path in the model, what it was, what it is now."""

    path: str
    before: str
    after: str


class PatchSummary:
    """What :func:`patch` replaced (or :func:`unpatch` restored); prints as a small table."""

    def __init__(self, replacements: List[Replacement], action: str = "patched") -> None:
        self.replacements = list(replacements)
        self.action = action

    def __len__(self) -> int:
        return len(self.replacements)

    def __iter__(self):
        return iter(self.replacements)

    def counts(self) -> Dict[str, int]:
        """Number of changes per ``before -> after`` kind."""
        out: Dict[str, int] = {}
        for r in self.replacements:
            key = f"{r.before} -> {r.after}"
            out[key] = out.get(key, 0) + 1
        return out

    def __repr__(self) -> str:
        return f"PatchSummary({self.action}: {self.counts()})"

    def __str__(self) -> str:
        if not self.replacements:
            return f"tilegrad: nothing {self.action}"
        width = max(len(r.path) for r in self.replacements)
        lines = [f"tilegrad {self.action} {len(self.replacements)} item(s):"]
        lines += [f"  {r.path:<{width}}  {r.before} -> {r.after}" for r in self.replacements]
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# undo records


@dataclasses.dataclass
class _ClassSwap:
    """``module.__class__`` was changed; ``added`` attributes were set for the new class."""

    module: torch.nn.Module
    old_class: type
    added: Tuple[str, ...]
    replacement: Replacement

    def undo(self) -> None:
        self.module.__class__ = self.old_class
        for name in self.added:
            self.module.__dict__.pop(name, None)


@dataclasses.dataclass
class _ForwardSwap:
    """An instance ``forward`` was installed; ``previous`` is the instance attribute it shadowed, if any."""

    module: torch.nn.Module
    had_instance_forward: bool
    previous: Any
    replacement: Replacement

    def undo(self) -> None:
        self.module.__dict__.pop(_PREVIOUS_FORWARD_ATTR, None)
        if self.had_instance_forward:
            self.module.__dict__["forward"] = self.previous
        else:
            self.module.__dict__.pop("forward", None)


def _records(model: torch.nn.Module) -> list:
    return model.__dict__.setdefault(_RECORDS_ATTR, [])


# ----------------------------------------------------------------------------------------------
# module class swaps


def _swap_rules(silu: bool, embedding: bool, cross_entropy: bool, binary_cross_entropy_with_logits: bool,
                linear_cross_entropy: bool) -> Dict[type, Tuple[type, Dict[str, Any]]]:
    """exact torch class -> (tilegrad class, attributes the tilegrad class needs and the old one lacks)."""
    rules: Dict[type, Tuple[type, Dict[str, Any]]] = {}
    if silu:
        rules[torch.nn.SiLU] = (tnn.SiLU, {})
        hf_activations = sys.modules.get("transformers.activations")  # never import transformers ourselves
        hf_silu = getattr(hf_activations, "SiLUActivation", None)
        if isinstance(hf_silu, type):
            rules[hf_silu] = (tnn.SiLU, {"inplace": False})
    if embedding:
        rules[torch.nn.Embedding] = (tnn.Embedding, {})
    if cross_entropy:
        rules[torch.nn.CrossEntropyLoss] = (tnn.CrossEntropyLoss, {"z_loss_scale": 0.0})
    if binary_cross_entropy_with_logits:
        rules[torch.nn.BCEWithLogitsLoss] = (tnn.BCEWithLogitsLoss, {})
    if linear_cross_entropy and hasattr(torch.nn, "LinearCrossEntropyLoss"):
        rules[torch.nn.LinearCrossEntropyLoss] = (tnn.LinearCrossEntropyLoss, {})
    return rules


def _swap_classes(model: torch.nn.Module, rules: Dict[type, Tuple[type, Dict[str, Any]]]) -> List[_ClassSwap]:
    swaps = []
    for path, module in model.named_modules(remove_duplicate=True):
        rule = rules.get(type(module))
        if rule is None:
            continue
        new_class, needed = rule
        old_class = type(module)
        added = tuple(name for name in needed if name not in module.__dict__)
        for name in added:
            module.__dict__[name] = needed[name]
        module.__class__ = new_class
        swaps.append(_ClassSwap(module, old_class, added, Replacement(path or "<model>", _qualname(old_class),
                                                                      _qualname(new_class))))
    return swaps


def _qualname(cls: type) -> str:
    module = "torch.nn" if cls.__module__.startswith("torch.nn.modules") else cls.__module__
    return f"{module}.{cls.__qualname__}"


# ----------------------------------------------------------------------------------------------
# Hugging Face causal LMs: the loss as a fused linear cross entropy


def _causal_lm_facts(module: torch.nn.Module) -> Optional[CausalLMFacts]:
    """The facts for a transformers causal LM this module can take the fused loss on, else None."""
    config = getattr(module, "config", None)
    facts = CAUSAL_LM_FACTS.get(getattr(config, "model_type", None))
    if facts is None or not type(module).__name__.endswith("ForCausalLM"):
        return None
    if not isinstance(getattr(module, facts.lm_head, None), torch.nn.Linear) \
            or not isinstance(getattr(module, facts.decoder, None), torch.nn.Module):
        return None
    return facts if _has_standard_causal_lm_signature(type(module)) else None


@functools.lru_cache(maxsize=None)
def _has_standard_causal_lm_signature(cls: type) -> bool:
    """The class's forward takes transformers' causal-LM arguments in the usual order (checked once per class)."""
    names = tuple(inspect.signature(cls.forward).parameters)[1:1 + len(_CAUSAL_LM_PARAMETERS)]
    return names == _CAUSAL_LM_PARAMETERS


def _standard_causal_lm_loss() -> Optional[Callable]:
    loss_utils = sys.modules.get("transformers.loss.loss_utils")
    return getattr(loss_utils, "ForCausalLMLoss", None)


_PREVIOUS_FORWARD_ATTR = "_tilegrad_previous_forward"


def _fused_causal_lm_forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                             inputs_embeds=None, labels=None, use_cache=None, logits_to_keep=0, **kwargs):
    """tilegrad-patched causal-LM forward: in training with labels the loss is a fused linear cross
    entropy from the final hidden states and ``logits`` is None; otherwise the model's own forward.

    Installed as a bound method (``types.MethodType``) so that ``copy.deepcopy`` of a patched model
    rebinds it to the copy.
    """
    arguments = dict(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                     past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache)
    facts = _causal_lm_facts(self)
    if facts is None or not _fused_loss_applies(self, labels, logits_to_keep):
        previous = self.__dict__.get(_PREVIOUS_FORWARD_ATTR) or type(self).forward.__get__(self)
        return previous(labels=labels, logits_to_keep=logits_to_keep, **arguments, **kwargs)
    return_dict = kwargs.pop("return_dict", None)
    if return_dict is None:
        return_dict = getattr(self.config, "return_dict", True)
    outputs = getattr(self, facts.decoder)(**arguments, **kwargs)
    loss = _fused_causal_lm_loss(outputs.last_hidden_state, getattr(self, facts.lm_head), labels, **kwargs)
    from transformers.modeling_outputs import CausalLMOutputWithPast

    result = CausalLMOutputWithPast(loss=loss, logits=None, past_key_values=outputs.past_key_values,
                                    hidden_states=outputs.hidden_states, attentions=outputs.attentions)
    return result if return_dict else result.to_tuple()


def _fused_loss_applies(model: torch.nn.Module, labels, logits_to_keep) -> bool:
    """Only the plain training case: labels, all positions, transformers' standard causal-LM loss."""
    return (model.training and labels is not None and isinstance(logits_to_keep, int) and logits_to_keep == 0
            and getattr(model.config, "final_logit_softcapping", None) is None
            and getattr(model, "loss_function", None) is _standard_causal_lm_loss())


def _fused_causal_lm_loss(hidden: torch.Tensor, lm_head: torch.nn.Linear, labels: torch.Tensor, *,
                          num_items_in_batch=None, ignore_index: int = -100, shift_labels=None, **_: Any
                          ) -> torch.Tensor:
    """transformers' ForCausalLMLoss (tokens < n predict n; mean over non-ignored tokens, or sum /
    num_items_in_batch), with the logits formed block by block inside tilegrad's fused op."""
    if shift_labels is None:
        # the label of position t is token t + 1; the last position has none (ignored), so hidden
        # stays whole and is never sliced or copied
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    shift_labels = shift_labels.to(hidden.device).reshape(hidden.shape[:-1])
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = TF.linear_cross_entropy(hidden, lm_head.weight, shift_labels, linear_bias=lm_head.bias,
                                   reduction=reduction, ignore_index=ignore_index).float()
    if num_items_in_batch is not None:
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def _swap_causal_lm_forwards(model: torch.nn.Module) -> List[_ForwardSwap]:
    swaps = []
    for path, module in model.named_modules(remove_duplicate=True):
        shadowed = module.__dict__.get("forward")
        if _causal_lm_facts(module) is None or getattr(shadowed, "__func__", None) is _fused_causal_lm_forward:
            continue  # not a supported causal LM, or patched already (from this root or another)
        had_instance_forward = "forward" in module.__dict__
        if had_instance_forward:  # e.g. a hook library's wrapper: the fallback path keeps calling it
            module.__dict__[_PREVIOUS_FORWARD_ATTR] = shadowed
        module.__dict__["forward"] = types.MethodType(_fused_causal_lm_forward, module)
        swaps.append(_ForwardSwap(module, had_instance_forward, shadowed,
                                  Replacement(f"{path + '.' if path else ''}forward", "logits + loss_function",
                                              "tilegrad fused linear cross entropy (training with labels)")))
    return swaps


# ----------------------------------------------------------------------------------------------
# public API: patch / unpatch


def patch(model: torch.nn.Module, *, silu: bool = True, embedding: bool = True, cross_entropy: bool = True,
          binary_cross_entropy_with_logits: bool = True, linear_cross_entropy: bool = True) -> PatchSummary:
    """Switch the supported modules of a built model to tilegrad, in place.

    Args:
        model: any ``torch.nn.Module``; its submodules are walked once.
        silu: ``torch.nn.SiLU`` (and transformers' ``SiLUActivation``) -> ``tilegrad.torch.nn.SiLU``.
        embedding: ``torch.nn.Embedding`` -> ``tilegrad.torch.nn.Embedding`` (same Parameter).
        cross_entropy: ``torch.nn.CrossEntropyLoss`` -> ``tilegrad.torch.nn.CrossEntropyLoss``.
        binary_cross_entropy_with_logits: ``torch.nn.BCEWithLogitsLoss`` -> tilegrad's.
        linear_cross_entropy: ``torch.nn.LinearCrossEntropyLoss`` -> tilegrad's, and the training loss
            of the transformers causal LMs in ``CAUSAL_LM_FACTS`` as a fused linear cross entropy.

    Returns:
        A :class:`PatchSummary` (printable) of what was replaced. Patching again only adds what is
        new; :func:`unpatch` undoes every patch of this model.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"patch: model must be a torch.nn.Module, got {type(model).__name__}")
    for name, value in (("silu", silu), ("embedding", embedding), ("cross_entropy", cross_entropy),
                        ("binary_cross_entropy_with_logits", binary_cross_entropy_with_logits),
                        ("linear_cross_entropy", linear_cross_entropy)):
        if not isinstance(value, bool):
            raise TypeError(f"patch: {name} must be True or False, got {value!r}")
    rules = _swap_rules(silu, embedding, cross_entropy, binary_cross_entropy_with_logits, linear_cross_entropy)
    changes: list = _swap_classes(model, rules)
    if linear_cross_entropy:
        changes += _swap_causal_lm_forwards(model)
    _records(model).extend(changes)
    return PatchSummary([c.replacement for c in changes])


def unpatch(model: torch.nn.Module) -> PatchSummary:
    """Undo every :func:`patch` of ``model``: original classes, attributes and forward methods.

    Returns a :class:`PatchSummary` of what was restored (empty if the model was not patched).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"unpatch: model must be a torch.nn.Module, got {type(model).__name__}")
    records = model.__dict__.pop(_RECORDS_ATTR, [])
    for record in reversed(records):
        record.undo()
    return PatchSummary([Replacement(r.replacement.path, r.replacement.after, r.replacement.before)
                         for r in records], action="restored")


# ----------------------------------------------------------------------------------------------
# public API: enable / disable (torch.nn.functional, process-wide)

_ROUTED = ("silu", "cross_entropy", "embedding", "binary_cross_entropy_with_logits", "linear_cross_entropy")
_displaced: Dict[str, Callable] = {}  # name -> what torch.nn.functional held before enable()


def enable() -> Tuple[str, ...]:
    """Route ``torch.nn.functional.{silu, cross_entropy, embedding, binary_cross_entropy_with_logits,
    linear_cross_entropy}`` to tilegrad.torch.functional, process-wide (every torch module that calls
    them, e.g. ``torch.nn.CrossEntropyLoss`` or transformers' loss, then runs on tilegrad).

    tilegrad's functions fall back to torch's originals captured when ``tilegrad.torch`` was
    imported, never to the rerouted names, so this cannot recurse. Names bound before the call with
    ``from torch.nn.functional import silu`` keep torch's function. Idempotent; returns the names now
    routed to tilegrad.
    """
    for name in _ROUTED:
        if not hasattr(F, name) or name in _displaced:
            continue
        ours = getattr(TF, name)
        if TF.TORCH_FUNCTIONS.get(name) is ours:  # would recurse: fallback must be torch's own function
            raise RuntimeError(f"enable: tilegrad.torch.functional.{name} falls back to itself")
        _displaced[name] = getattr(F, name)
        setattr(F, name, ours)
    return tuple(_displaced)


def disable() -> Tuple[str, ...]:
    """Undo :func:`enable`: each ``torch.nn.functional`` name gets back what it held before (unless
    someone rebound it since, which is left alone). Returns the names restored."""
    restored = []
    for name, previous in list(_displaced.items()):
        if getattr(F, name, None) is getattr(TF, name):
            setattr(F, name, previous)
            restored.append(name)
        del _displaced[name]
    return tuple(restored)


def is_enabled() -> bool:
    """True while :func:`enable` routes torch.nn.functional to tilegrad."""
    return bool(_displaced)
