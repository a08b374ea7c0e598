"""One-line adoption: switch an existing model, or torch.nn.functional as a whole, to tilegrad.

    import tilegrad.torch as tgt
    summary = tgt.patch(model)    # in place; prints as a table of what was replaced
    tgt.unpatch(model)            # exactly the original classes again
    tgt.enable()                  # torch.nn.functional.silu/cross_entropy/... -> tilegrad, process-wide
    tgt.disable()                 # torch's functions again

``patch`` changes the *class* of each supported module (``module.__class__``) to tilegrad's subclass
of the same torch class, so the module object, its Parameter objects, hooks, ``state_dict`` and any
optimizer built on ``model.parameters()`` are untouched. Only modules whose type is exactly the torch
class are switched (a user subclass may override ``forward``).

Patching is all or nothing: everything is planned before anything changes, so a module that cannot
be inspected (a ``config`` property that raises, say) leaves the model as it was. What ``patch``
knows how to do for a kind of module but cannot do for this one (a causal LM whose ``model_type`` is
not in ``CAUSAL_LM_FACTS``, a head that is not ``nn.Linear``, a forward whose arguments cannot be
mapped) is said in one ``UserWarning`` per module and listed in ``PatchSummary.skipped``;
``patch(model, strict=True)`` raises ``ValueError`` instead. Each change is recorded on the module
it changed, so ``unpatch(model)`` undoes every patch inside ``model``, whichever root it was made from.

(The module is ``tilegrad.torch.patching``; the package re-exports its functions, so
``tgt.patch(model)`` is the function.)

With Hugging Face ``transformers`` loaded, ``patch`` also handles the causal LMs listed in
``CAUSAL_LM_FACTS``: their SiLU activation modules (``transformers.activations.SiLUActivation``), the
token embedding (a plain ``torch.nn.Embedding``), and the training loss, which is computed as a fused
linear cross entropy from the final hidden states (as Liger-Kernel does) so the ``(tokens, vocab)``
logits never exist whole: in training mode with ``labels``, the output has the loss (float32, as the
model's own loss is) and ``logits=None`` (with ``return_dict=False``, None at the logits' index).
Without labels, in eval mode, with a hook on ``lm_head`` or with options the fused path does not
cover, the model's own forward runs unchanged.

The fused loss is the forward of a class: the model becomes an instance of a subclass of its own
class, under the same name. A user's subclass of a transformers causal LM keeps its own forward,
whose ``super().forward(...)`` reaches the fused one (an auxiliary loss it adds is kept); a forward
wrapper set on the instance after ``patch`` (accelerate's ``prepare``) wraps the fused forward. A
wrapper set *before* ``patch`` calls the library's forward itself: that loss stays unfused, and
``patch`` says so (patch first, then wrap). ``torch.compile(model, fullgraph=True)`` traces the
fused forward.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import sys
import types
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch.nn import functional as F
from torch.nn.modules import module as _torch_module

from . import _attention as TA
from . import _add_rms_norm, _gelu, _linear, _rms_norm, _rope, _swiglu
from . import functional as TF
from . import nn as tnn

__all__ = ["patch", "unpatch", "enable", "disable", "is_enabled", "PatchSummary", "Replacement", "Skipped",
           "CAUSAL_LM_FACTS"]

_RECORDS_ATTR = "_tilegrad_patch_records"  # on each module patch changed: its undo records
_sequence = itertools.count()  # orders undo records across modules and roots


# ----------------------------------------------------------------------------------------------
# per-model facts


# decoder-block classes ``<prefix><suffix>`` -> the kind of tilegrad subclass patch gives them (see _BLOCK_KINDS)
_STANDARD_BLOCKS = (("RMSNorm", "RMSNorm"), ("MLP", "MLP"), ("Attention", "Attention"))
# mixture of experts: the standard blocks (MLP: the shared or dense-layer expert) and the routed experts
_MOE_BLOCKS = _STANDARD_BLOCKS + (("Experts", "Experts"),)
_ROUTED_ONLY_MOE_BLOCKS = (("RMSNorm", "RMSNorm"), ("Attention", "Attention"), ("Experts", "Experts"))
_GEMMA_BLOCKS = (("RMSNorm", "OffsetRMSNorm"), ("MLP", "MLP"), ("Attention", "Attention"),
                 ("TextScaledWordEmbedding", "TextScaledWordEmbedding"))
# GPT-2 and GPT-NeoX: their LayerNorms are plain torch.nn.LayerNorm (patch's layer_norm rule), GPT-2's
# positions are learned (an embedding); what is theirs is the GELU MLP and NeoX's (partial) rotary attention
_GPT2_BLOCKS = (("MLP", "Conv1DGeluMLP"),)
_GPT_NEOX_BLOCKS = (("MLP", "GeluMLP"), ("Attention", "Attention"))


@dataclasses.dataclass(frozen=True)
class CausalLMFacts:
    """Where a Hugging Face causal LM keeps the parts the fused loss needs.

    ``decoder``: attribute holding the base model (returns ``last_hidden_state``); ``lm_head``:
    attribute holding the output ``nn.Linear``. All listed models share transformers' standard
    causal-LM forward (``self.model`` -> ``slice_logits_to_keep`` -> ``self.lm_head`` ->
    ``self.loss_function``), checked by the tests against each model's own forward. The argument
    names are not listed: the fused forward reads them from the library class's own signature.

    ``prefix``: the family's class-name prefix in ``transformers.models.<modeling>.modeling_<modeling>``
    (``modeling``: the model type unless given); ``blocks``: the decoder-block classes patch replaces
    there, ``(suffix, kind)`` pairs naming the class ``<prefix><suffix>`` and what its tilegrad subclass
    does (``_BLOCK_KINDS``; the attention applies the rotary embedding through that module's
    ``apply_rotary_pos_emb``; Gemma's RMSNorm multiplies by ``1 + weight`` computed in float32).

    ``logits_divisor``: the config attribute the head divides the logits by (Granite's
    ``logits_scaling``); the fused loss divides the hidden states (and the head's bias) instead.
    ``residual_add_norm``: the decoder layer is Llama's (``residual + attention output``, then the
    post-attention RMSNorm), fused into one add_rms_norm by ``patch(add_rms_norm=True)``.
    ``lm_head_renamed_from``: the head's attribute in earlier transformers 5.x releases (GPT-NeoX's
    ``embed_out``, ``lm_head`` since). ``router_aux_loss``: a mixture of experts whose forward adds
    ``router_aux_loss_coef`` times its module's ``load_balancing_loss_func`` of the router logits
    (with ``output_router_logits``); the fused forward adds the same term, computed by that same
    function.
    """

    prefix: str
    decoder: str = "model"
    lm_head: str = "lm_head"
    blocks: Tuple[Tuple[str, str], ...] = _STANDARD_BLOCKS
    logits_divisor: Optional[str] = None
    router_aux_loss: bool = False
    modeling: Optional[str] = None
    residual_add_norm: bool = False
    lm_head_renamed_from: Optional[str] = None

    def head_name(self, model: torch.nn.Module) -> str:
        """The attribute holding this model's output layer: ``lm_head``, or where the model has only the
        head's name from before transformers renamed it, that one (GPT-NeoX's ``embed_out``, 5.0)."""
        old = self.lm_head_renamed_from
        return old if old is not None and self.lm_head not in model._modules and old in model._modules \
            else self.lm_head

    def modeling_module(self, model_type: str) -> str:
        """The name of the family's modeling module (loaded or not)."""
        name = self.modeling or model_type
        return f"transformers.models.{name}.modeling_{name}"


# keyed by ``config.model_type``; every entry is exercised by tests/torch/test_patching.py (the first
# four), tests/torch/test_patching_families.py, tests/torch/test_patch_gemma.py (Gemma 1 / 2 / 3) and
# tests/torch/test_patch_gpt.py (GPT-2, GPT-NeoX)
CAUSAL_LM_FACTS: Dict[str, CausalLMFacts] = {
    "llama": CausalLMFacts("Llama", residual_add_norm=True),
    "mistral": CausalLMFacts("Mistral", residual_add_norm=True),
    "qwen2": CausalLMFacts("Qwen2", residual_add_norm=True),
    "qwen3": CausalLMFacts("Qwen3", residual_add_norm=True),
    "gemma": CausalLMFacts("Gemma", blocks=_GEMMA_BLOCKS),
    "gemma2": CausalLMFacts("Gemma2", blocks=_GEMMA_BLOCKS),
    "gemma3_text": CausalLMFacts("Gemma3", modeling="gemma3", blocks=_GEMMA_BLOCKS),  # Gemma3ForCausalLM
    "phi3": CausalLMFacts("Phi3", blocks=(("RMSNorm", "RMSNorm"), ("MLP", "GateUpMLP"), ("Attention", "Attention"))),
    "olmo2": CausalLMFacts("Olmo2", blocks=(("RMSNorm", "RMSNorm"), ("MLP", "MLP"),
                                            ("Attention", "UpcastRopeAttention"))),
    "granite": CausalLMFacts("Granite", logits_divisor="logits_scaling"),
    "mixtral": CausalLMFacts("Mixtral", blocks=_ROUTED_ONLY_MOE_BLOCKS, router_aux_loss=True),
    "qwen2_moe": CausalLMFacts("Qwen2Moe", blocks=_MOE_BLOCKS, router_aux_loss=True),
    "qwen3_moe": CausalLMFacts("Qwen3Moe", blocks=_MOE_BLOCKS, router_aux_loss=True),
    "gpt2": CausalLMFacts("GPT2", decoder="transformer", blocks=_GPT2_BLOCKS),  # GPT2LMHeadModel
    "gpt_neox": CausalLMFacts("GPTNeoX", decoder="gpt_neox", blocks=_GPT_NEOX_BLOCKS,
                              lm_head_renamed_from="embed_out"),  # Pythia
}

# the parameters of a causal-LM forward that the fused path reads itself; every other named
# parameter is handed on to the decoder under its own name, whatever transformers calls it
_CONSUMED_PARAMETERS = ("labels", "logits_to_keep")
# module class names that mark a language model with a loss head (transformers' naming)
_LM_CLASS_SUFFIXES = ("ForCausalLM", "LMHeadModel")


# ----------------------------------------------------------------------------------------------
# summary


@dataclasses.dataclass(frozen=True)
class Replacement:
    """One change made by :func:`patch`: module path in the model, what it was, what it is now."""

    path: str
    before: str
    after: str


@dataclasses.dataclass(frozen=True)
class Skipped:
    """Something :func:`patch` knows how to replace for this kind of module but left as it was, and why."""

    path: str
    module: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path} ({self.module}): {self.reason}"


class PatchSummary:
    """What :func:`patch` replaced (or :func:`unpatch` restored), and what it left as it was; prints
    as a small table."""

    def __init__(self, replacements: List[Replacement], action: str = "patched",
                 skipped: Optional[List[Skipped]] = None) -> None:
        self.replacements = list(replacements)
        self.action = action
        self.skipped = list(skipped or [])

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
        return f"PatchSummary({self.action}: {self.counts()}, skipped={len(self.skipped)})"

    def __str__(self) -> str:
        lines = [f"tilegrad: nothing {self.action}"] if not self.replacements else \
            [f"tilegrad {self.action} {len(self.replacements)} item(s):"]
        if self.replacements:
            width = max(len(r.path) for r in self.replacements)
            lines += [f"  {r.path:<{width}}  {r.before} -> {r.after}" for r in self.replacements]
        if self.skipped:
            lines.append(f"left as it was ({len(self.skipped)}):")
            lines += [f"  {s}" for s in self.skipped]
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# undo records, kept on the module each one changed


@dataclasses.dataclass
class _ClassSwap:
    """``module.__class__`` was changed to ``new_class``; ``added`` attributes were set for it."""

    module: torch.nn.Module
    old_class: type
    new_class: type
    added: Dict[str, Any]
    replacement: Replacement
    sequence: int = dataclasses.field(default_factory=lambda: next(_sequence))

    def apply(self) -> None:
        for name, value in self.added.items():
            self.module.__dict__[name] = value
        self.module.__class__ = self.new_class

    def undo_problem(self) -> Optional[str]:
        current = type(self.module)
        if current is self.new_class or self.new_class in current.__bases__:
            return None
        return (f"its class is now {_qualname(current)}, neither {_qualname(self.new_class)} nor a class "
                f"derived from it")

    def __getstate__(self) -> Dict[str, Any]:
        """A causal-LM class made by patch has no importable name: it pickles as what it is made from."""
        state = dict(self.__dict__)
        if issubclass(self.new_class, _FusedCausalLM):
            state["new_class"] = _FusedClassKey.of(self.new_class)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        if isinstance(state["new_class"], _FusedClassKey):
            state = {**state, "new_class": state["new_class"].made()}
        self.__dict__.update(state)

    def undo(self) -> None:
        current = type(self.module)
        if current is self.new_class:
            self.module.__class__ = self.old_class
        else:  # a class derived from ours after patch(), e.g. torch.nn.utils.parametrize's Parametrized<X>
            self.module.__class__ = _rebased(current, self.new_class, self.old_class)
        for name in self.added:
            self.module.__dict__.pop(name, None)


def _rebased(cls: type, base: type, replacement: type) -> type:
    """``cls`` again, deriving from ``replacement`` where it derived from ``base``: a class made for the
    patched module after patching (parametrizations inject one, holding the parametrized properties)
    is kept, over the original class. Its own later undo (``remove_parametrizations`` restores
    ``__bases__[0]``) then lands on the original class too."""
    namespace = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    bases = tuple(replacement if b is base else b for b in cls.__bases__)
    return type(cls.__name__, bases, namespace)


def _record(change: _ClassSwap) -> None:
    change.module.__dict__.setdefault(_RECORDS_ATTR, []).append(change)


def _unrecord(change: _ClassSwap) -> None:
    records = change.module.__dict__.get(_RECORDS_ATTR, [])
    if change in records:
        records.remove(change)
    if not records:
        change.module.__dict__.pop(_RECORDS_ATTR, None)


# ----------------------------------------------------------------------------------------------
# module class swaps


def _swap_rules(silu: bool, embedding: bool, cross_entropy: bool, binary_cross_entropy_with_logits: bool,
                linear_cross_entropy: bool, rms_norm: bool, linear: bool,
                layer_norm: bool = False) -> Dict[type, Tuple[type, Dict[str, Any]]]:
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
    if rms_norm:
        rules[torch.nn.RMSNorm] = (tnn.RMSNorm, {})
    if linear:
        rules[torch.nn.Linear] = (tnn.Linear, {})
        hf_conv1d = getattr(sys.modules.get("transformers.pytorch_utils"), "Conv1D", None)
        if isinstance(hf_conv1d, type) and issubclass(hf_conv1d, torch.nn.Module):
            rules[hf_conv1d] = (_tilegrad_subclass(hf_conv1d, "Conv1D"), {})
    if layer_norm:  # GPT-2's and GPT-NeoX's norms are plain torch.nn.LayerNorm modules
        rules[torch.nn.LayerNorm] = (tnn.LayerNorm, {})
    return rules


def _decoder_block_rules(rms_norm: bool, swiglu: bool, rope: bool, embedding: bool = True, gelu: bool = True
                         ) -> Dict[type, Tuple[type, Dict[str, Any]]]:
    """The Hugging Face decoder-block classes of the loaded families -> tilegrad's subclasses of them."""
    wanted = {"rms_norm": rms_norm, "swiglu": swiglu, "rope": rope, "embedding": embedding, "gelu": gelu}
    rules: Dict[type, Tuple[type, Dict[str, Any]]] = {}
    for model_type, facts in CAUSAL_LM_FACTS.items():
        modeling = sys.modules.get(facts.modeling_module(model_type))
        for suffix, kind in facts.blocks:
            cls = getattr(modeling, facts.prefix + suffix, None)
            if wanted[_BLOCK_KINDS[kind][0]] and isinstance(cls, type) and issubclass(cls, torch.nn.Module):
                rules[cls] = (_tilegrad_subclass(cls, kind), {})
    return rules


@functools.lru_cache(maxsize=None)
def _tilegrad_subclass(cls: type, kind: str) -> type:
    """``Tilegrad<cls>``: ``cls`` with tilegrad's RMSNorm, silu_mul / gelu_mul / swiglu, rotary embedding
    or embedding in its forward.

    Made once per class and kept as an attribute of this module, so a pickled patched model loads
    again (``__getattr__`` below rebuilds it in a new process)."""
    _, doc, methods = _BLOCK_KINDS[kind]
    name = f"Tilegrad{cls.__name__}"
    subclass = type(name, (cls,), {**methods(cls), "__module__": __name__, "__qualname__": name,
                                   "__doc__": f"{cls.__name__} with tilegrad's {doc}."})
    globals()[name] = subclass
    return subclass


def __getattr__(name: str):
    """``Tilegrad<Family><Kind>`` classes on first use (unpickling a patched model in a new process)."""
    for model_type, facts in CAUSAL_LM_FACTS.items():
        for suffix, kind in facts.blocks + ((("DecoderLayer", "DecoderLayer"),) if facts.residual_add_norm else ()):
            if name == f"Tilegrad{facts.prefix}{suffix}":
                import importlib
                modeling = importlib.import_module(facts.modeling_module(model_type))
                return _tilegrad_subclass(getattr(modeling, facts.prefix + suffix), kind)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _rms_norm_forward(base: type) -> Callable:
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        if weight.dtype != hidden_states.dtype:  # Hugging Face returns weight * x in the promoted dtype
            return base.forward(self, hidden_states)
        return _rms_norm.rms_norm(hidden_states, weight.shape, weight, self.variance_epsilon)
    return forward


def _offset_rms_norm_forward(weight_offset: float) -> Callable:
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # Gemma's RMSNorm: float32 x * rstd * (offset + weight), returned in x's dtype whatever the weight's
        weight = self.weight
        return _rms_norm.rms_norm(hidden_states, weight.shape, weight, self.eps, weight_offset=weight_offset)
    return forward


def _mlp_forward(base: type) -> Callable:
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(self.act_fn, _silu_classes()):
            return self.down_proj(_swiglu.silu_mul(self.gate_proj(x), self.up_proj(x)))
        approximate = _gelu_approximation(self.act_fn)
        if approximate is not None:  # Gemma's gelu_pytorch_tanh(gate) * up
            return self.down_proj(_gelu.gelu_mul(self.gate_proj(x), self.up_proj(x), approximate))
        return base.forward(self, x)  # another activation: the model's own forward
    return forward


def _gelu_approximation(act_fn: Any) -> Optional[str]:
    """``"tanh"`` / ``"none"`` for an activation module computing torch's GELU of that form (transformers'
    ``GELUTanh``, its ``GELUActivation`` on torch's gelu, ``torch.nn.GELU``; GPT-2's ``gelu_new``,
    ``NewGELUActivation``, writes the tanh form out in torch ops: the same function, rounded at each
    op where tilegrad rounds once), else None."""
    if type(act_fn) is torch.nn.GELU:
        return act_fn.approximate
    activations = sys.modules.get("transformers.activations")
    new_gelu = getattr(activations, "NewGELUActivation", None)
    if isinstance(new_gelu, type) and type(act_fn) is new_gelu:
        return "tanh"
    for name, approximate in (("GELUTanh", "tanh"), ("PytorchGELUTanh", "tanh"), ("GELUActivation", "none")):
        cls = getattr(activations, name, None)
        if isinstance(cls, type) and type(act_fn) is cls and _on_torch_gelu(act_fn, approximate):
            return approximate
    return None


def _on_torch_gelu(act_fn: Any, approximate: str) -> bool:
    """The activation calls torch's gelu of that form (not a Python formula of its own)."""
    act = getattr(act_fn, "act", None)
    if isinstance(act, functools.partial):
        return act.func is F.gelu and not act.args and act.keywords == {"approximate": approximate}
    return act is F.gelu and approximate == "none"


def _gelu_mlp_forward(base: type, up: str, down: str, dropout: Optional[str] = None) -> Callable:
    """A two-layer MLP ``down(act(up(x)))`` (then ``dropout``) whose ``act`` is a GELU: tgt.gelu of that
    form. GPT-2's (``c_fc`` / ``c_proj``, Conv1D layers, and a dropout) and
    GPT-NeoX's (``dense_h_to_4h`` / ``dense_4h_to_h``). Another activation keeps the model's forward."""
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        approximate = _gelu_approximation(self.act)
        if approximate is None:
            return base.forward(self, hidden_states)
        out = getattr(self, down)(_gelu.gelu(getattr(self, up)(hidden_states), approximate))
        return getattr(self, dropout)(out) if dropout is not None else out
    return forward


def _conv1d_forward(self, x: torch.Tensor) -> torch.Tensor:
    """transformers' ``Conv1D``: ``x @ weight + bias`` with ``weight`` of ``[in, out]``, which is
    ``F.linear(x, weight.t(), bias)``: tgt.linear reads the transposed view in place and gives its
    gradient back in the parameter's layout."""
    return _linear.linear(x, self.weight.t(), self.bias)


def _scaled_embedding_forward(base: type) -> Callable:
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        # Gemma's embedding times sqrt(hidden), the scale rounded to the weight's dtype as transformers does
        rows = TF.embedding(input_ids, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                            self.scale_grad_by_freq, self.sparse)
        return rows * self.embed_scale.to(self.weight.dtype)
    return forward


def _gate_up_mlp_forward(base: type) -> Callable:
    """Phi-3's MLP: one projection to ``[gate, up]``, then ``up * act(gate)``: SwiGLU on one tensor."""
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if not isinstance(self.activation_fn, _silu_classes()):
            return base.forward(self, hidden_states)
        return self.down_proj(_swiglu.swiglu(self.gate_up_proj(hidden_states)))
    return forward


def _experts_methods(base: type) -> Dict[str, Callable]:
    """transformers' fused experts (3-D ``gate_up_proj`` ``(E, 2I, H)`` and ``down_proj`` ``(E, H, I)``):
    their batched / grouped implementations gate through ``_apply_gate`` (``act(gate) * up`` on the
    ``[gate, up]`` rows), here SwiGLU on one tensor; the eager implementation (a loop over the
    experts hit) runs the same loop with it. Other layouts and activations keep the model's own code."""
    base_apply_gate = getattr(base, "_apply_gate", None)

    def plain_swiglu(self) -> bool:
        return (isinstance(self.act_fn, _silu_classes()) and getattr(self, "is_concatenated", True)
                and getattr(self, "has_gate", True))

    def _apply_gate(self, gate_up_out: torch.Tensor) -> torch.Tensor:
        if not plain_swiglu(self):
            return base_apply_gate(self, gate_up_out)
        return _swiglu.swiglu(gate_up_out)

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
                ) -> torch.Tensor:
        implementation = getattr(getattr(self, "config", None), "_experts_implementation", "eager")
        if (implementation not in (None, "eager") or not plain_swiglu(self) or getattr(self, "has_bias", False)
                or getattr(self, "is_transposed", False)):
            return base.forward(self, hidden_states, top_k_index, top_k_weights)
        return _eager_experts(self, hidden_states, top_k_index, top_k_weights)

    methods = {"forward": forward}
    if base_apply_gate is not None:
        methods["_apply_gate"] = _apply_gate
    return methods


def _eager_experts(experts: torch.nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                   top_k_weights: torch.Tensor) -> torch.Tensor:
    """Each token's top-k experts, one expert at a time over the tokens routed to it: the tokens'
    ``down(swiglu(gate_up(x)))`` times their routing weight, added into their output rows."""
    out = torch.zeros_like(hidden_states)
    with torch.no_grad():  # (expert, k, token) routing table; an index past the last expert routes nowhere
        routed = F.one_hot(top_k_index, num_classes=experts.num_experts + 1).permute(2, 1, 0)
        hit = torch.greater(routed.sum(dim=(-1, -2)), 0).nonzero()
    for expert in hit[:, 0]:
        if expert == experts.num_experts:
            continue
        slot, token = torch.where(routed[expert])
        inner = _swiglu.swiglu(F.linear(hidden_states[token], experts.gate_up_proj[expert]))
        expert_out = F.linear(inner, experts.down_proj[expert]) * top_k_weights[token, slot, None]
        out.index_add_(0, token, expert_out.to(out.dtype))
    return out


# kind -> (the patch() flag that enables it, what the subclass does, its methods made from the base class)
_BLOCK_KINDS: Dict[str, Tuple[str, str, Callable[[type], Dict[str, Callable]]]] = {
    "RMSNorm": ("rms_norm", "rms_norm (one rounding in bf16 / fp16; Hugging Face's rounds twice)",
                lambda cls: {"forward": _rms_norm_forward(cls)}),
    "MLP": ("swiglu", "silu_mul / gelu_mul for act_fn(gate_proj(x)) * up_proj(x)",
            lambda cls: {"forward": _mlp_forward(cls)}),
    "OffsetRMSNorm": ("rms_norm", "rms_norm with weight_offset=1 (Gemma's float32 x * rstd * (1 + weight))",
                      lambda cls: {"forward": _offset_rms_norm_forward(1.0)}),
    "TextScaledWordEmbedding": ("embedding", "embedding (deterministic backward), then the scale",
                                lambda cls: {"forward": _scaled_embedding_forward(cls)}),
    # not in any family's blocks: _plan_fused_residual_adds swaps the layers of families with residual_add_norm
    "DecoderLayer": ("add_rms_norm", "add_rms_norm for residual + attention output and the post-attention RMSNorm",
                     lambda cls: {"forward": _decoder_layer_forward(cls)}),
    "GateUpMLP": ("swiglu", "swiglu for up * act(gate) of one gate_up_proj",
                  lambda cls: {"forward": _gate_up_mlp_forward(cls)}),
    "Experts": ("swiglu", "swiglu for each expert's act(gate) * up", _experts_methods),
    "GeluMLP": ("gelu", "gelu for dense_4h_to_h(act(dense_h_to_4h(x))) (GPT-NeoX)",
                lambda cls: {"forward": _gelu_mlp_forward(cls, "dense_h_to_4h", "dense_4h_to_h")}),
    "Conv1DGeluMLP": ("gelu", "gelu for c_proj(act(c_fc(x))) (GPT-2)",
                      lambda cls: {"forward": _gelu_mlp_forward(cls, "c_fc", "c_proj", dropout="dropout")}),
    # not in any family's blocks: _swap_rules swaps transformers' Conv1D wherever it is (linear=True)
    "Conv1D": ("linear", "linear for addmm(bias, x, weight) (GPT-2's layers: the [in, out] weight read transposed "
               "in place)", lambda cls: {"forward": _conv1d_forward}),
    "Attention": ("rope", "apply_rotary_pos_emb (rotate-half; a partial rotary rotates the leading features)",
                  lambda cls: {"forward": _with_global(cls.forward, "apply_rotary_pos_emb",
                                                       _rope.apply_rotary_pos_emb)}),
    "UpcastRopeAttention": ("rope", "apply_rotary_pos_emb (rotate-half in cos / sin's dtype, rounded to q's once)",
                            lambda cls: {"forward": _with_global(cls.forward, "apply_rotary_pos_emb",
                                                                 _apply_rotary_pos_emb_in_trig_dtype)}),
}


def _apply_rotary_pos_emb_in_trig_dtype(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                                        unsqueeze_dim: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """OLMo2's rotary embedding: float32 cos / sin rotate bf16 / fp16 q and k in float32, and the
    results are rounded back to q's and k's dtypes (its own function upcasts through ``q * cos``)."""
    q_out, k_out = _rope.apply_rotary_pos_emb(q.to(cos.dtype), k.to(cos.dtype), cos, sin, unsqueeze_dim)
    return q_out.to(q.dtype), k_out.to(k.dtype)


def _silu_classes() -> Tuple[type, ...]:
    hf_silu = getattr(sys.modules.get("transformers.activations"), "SiLUActivation", None)
    return (torch.nn.SiLU,) + ((hf_silu,) if isinstance(hf_silu, type) else ())


def _with_global(function: Any, name: str, value: Any, _copies: Optional[Dict[int, Any]] = None) -> Any:
    """A copy of ``function`` that sees the global ``name`` as ``value``; the functions it wraps (a
    decorator's closure, e.g. transformers' ``deprecate_kwarg``) are copied the same way. The original
    and its module are untouched: nothing changes process-wide."""
    if not isinstance(function, types.FunctionType):
        return function
    copies = {} if _copies is None else _copies
    if id(function) in copies:
        return copies[id(function)]
    namespace = function.__globals__
    if name in function.__code__.co_names:
        namespace = dict(namespace)
        namespace[name] = value
    copy = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                              function.__closure__)
    copies[id(function)] = copy
    if function.__closure__:
        cells = tuple(types.CellType(_with_global(cell.cell_contents, name, value, copies))
                      for cell in function.__closure__)
        copy = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, cells)
        copies[id(function)] = copy
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__dict__.update(function.__dict__)
    if "__wrapped__" in function.__dict__:
        copy.__wrapped__ = _with_global(function.__wrapped__, name, value, copies)
    copy.__qualname__ = function.__qualname__
    return copy


def _plan_class_swap(path: str, module: torch.nn.Module, rules: Dict[type, Tuple[type, Dict[str, Any]]]
                     ) -> Optional[_ClassSwap]:
    rule = rules.get(type(module))
    if rule is None:
        return None
    new_class, needed = rule
    added = {name: value for name, value in needed.items() if name not in module.__dict__}
    return _ClassSwap(module, type(module), new_class, added,
                      Replacement(path or "<model>", _qualname(type(module)), _qualname(new_class)))


def _qualname(cls: type) -> str:
    module = "torch.nn" if cls.__module__.startswith("torch.nn.modules") else cls.__module__
    return f"{module}.{cls.__qualname__}"


# ----------------------------------------------------------------------------------------------
# Hugging Face causal LMs: the loss as a fused linear cross entropy
#
# The fused loss lives in a class, never on the instance: patch gives the model a subclass of the
# transformers causal-LM class it is (or derives from) whose forward is the fused one. Below a user's
# subclass it is inserted under that subclass, so the user's forward still runs and reaches it through
# super().forward (an auxiliary loss is kept); a forward wrapper set on the instance after patch
# (accelerate's prepare) wraps it. A wrapper set before patch holds the library's forward itself, past
# any class patch could insert: that loss is left unfused, and patch says so.


@dataclasses.dataclass(frozen=True)
class _ForwardMap:
    """The library's causal-LM forward, read once at patch time (nothing is inspected while it runs,
    so torch.compile traces it): its named parameters in positional order and their defaults, those
    handed on to the decoder (the rest, such as ``num_items_in_batch``, arrive in its ``**kwargs``),
    and its output class with that class's fields in order."""

    positional: Tuple[str, ...]
    defaults: Dict[str, Any]
    passed: Tuple[str, ...]
    output_class: type
    output_fields: Tuple[str, ...]
    library: Optional[type] = None  # the causal-LM class whose forward this is

    def bind(self, args: tuple, kwargs: Dict[str, Any]) -> Optional[Tuple[Dict[str, Any], Dict[str, Any]]]:
        """``(named arguments with the defaults filled in, the **kwargs rest)`` as the library forward
        binds them; None where it would not bind them (its own call then raises its own error)."""
        given = dict(zip(self.positional, args))
        if len(args) > len(self.positional) or any(name in kwargs for name in given):
            return None
        named = {**self.defaults, **given}
        rest = {}
        for name, value in kwargs.items():
            if name in named:
                named[name] = value
            else:
                rest[name] = value
        if any(value is inspect.Parameter.empty for value in named.values()):
            return None
        return named, rest


def _looks_like_language_model(module: torch.nn.Module) -> bool:
    return any(c.__name__.endswith(_LM_CLASS_SUFFIXES) for c in type(module).__mro__) and hasattr(module, "config")


def _library_class(cls: type) -> Optional[type]:
    """The transformers causal-LM class ``cls`` is or derives from (the nearest), else None: a
    ``<Family>ForCausalLM``, or GPT-2's ``GPT2LMHeadModel`` (the older naming)."""
    for base in cls.__mro__:
        if base.__module__.startswith("transformers.") and base.__name__.endswith(_LM_CLASS_SUFFIXES):
            return base
    return None


def _causal_lm_facts(module: torch.nn.Module) -> Union[CausalLMFacts, str]:
    """The facts for a transformers causal LM this module can take the fused loss on, else the reason
    it cannot (a sentence for the warning)."""
    model_type = getattr(getattr(module, "config", None), "model_type", None)
    facts = CAUSAL_LM_FACTS.get(model_type)
    if facts is None:
        return (f"model_type {model_type!r} is not in tilegrad.torch.patching.CAUSAL_LM_FACTS "
                f"({', '.join(sorted(CAUSAL_LM_FACTS))}); its loss is not fused")
    library = _library_class(type(module))
    if library is None:
        return (f"{type(module).__name__} derives from no transformers ForCausalLM or LMHeadModel class; its loss "
                f"is not fused")
    if "forward" in module.__dict__:
        return (f"its forward is set on the instance (a wrapper, as accelerate's prepare() installs), which calls "
                f"{library.__name__}.forward past any class patch could give the model; its loss is not fused: "
                f"patch before wrapping")
    head = getattr(module, facts.head_name(module), None)
    if type(head) not in _LINEAR_CLASSES:
        return f"its {facts.head_name(module)} is {type(head).__name__}, not torch.nn.Linear; its loss is not fused"
    decoder = getattr(module, facts.decoder, None)
    if not isinstance(decoder, torch.nn.Module):
        return f"it has no decoder module {facts.decoder!r}; its loss is not fused"
    forward_map = _forward_map(library)
    if isinstance(forward_map, str):
        reason = forward_map
    else:
        reason = (_decoder_refusal(library, forward_map, type(decoder), facts)
                  or _router_refusal(module, library, forward_map, facts))
    return facts if reason is None else reason + "; its loss is not fused"


@functools.lru_cache(maxsize=None)
def _forward_map(library: type) -> Union[_ForwardMap, str]:
    """Read the library class's forward once: what it takes is what the fused forward takes and hands
    on. A reason (str) where it cannot be mapped."""
    signature = inspect.signature(library.forward)
    parameters = list(signature.parameters.values())[1:]
    names = [p.name for p in parameters]
    missing = [name for name in _CONSUMED_PARAMETERS if name not in names]
    if missing:
        return f"{library.__name__}.forward has no parameter {' or '.join(map(repr, missing))}"
    if any(p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in parameters):
        return f"{library.__name__}.forward takes positional-only arguments"
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        return f"{library.__name__}.forward takes no **kwargs (where the loss options arrive)"
    named = [p for p in parameters if p.kind is not p.VAR_KEYWORD]
    output_class = _output_class(signature)
    return _ForwardMap(positional=tuple(p.name for p in named if p.kind is p.POSITIONAL_OR_KEYWORD),
                       defaults={p.name: p.default for p in named},
                       passed=tuple(p.name for p in named if p.name not in _CONSUMED_PARAMETERS),
                       output_class=output_class,
                       output_fields=tuple(f.name for f in dataclasses.fields(output_class)), library=library)


def _output_class(signature: inspect.Signature) -> type:
    """The output class the forward is annotated with, else transformers' CausalLMOutputWithPast."""
    annotation = signature.return_annotation
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    from transformers.modeling_outputs import CausalLMOutputWithPast  # loaded with any transformers model
    return CausalLMOutputWithPast


def _decoder_refusal(library: type, forward_map: _ForwardMap, decoder_cls: type, facts: CausalLMFacts
                     ) -> Optional[str]:
    """Why the decoder cannot take what the library forward hands it, else None. A mixture of experts'
    decoder takes ``output_router_logits`` in its ``**kwargs`` (transformers' output capturing reads it)."""
    decoder_parameters = inspect.signature(decoder_cls.forward).parameters
    in_kwargs = ({_ROUTER_PARAMETER} if facts.router_aux_loss
                 and any(p.kind is p.VAR_KEYWORD for p in decoder_parameters.values()) else set())
    not_taken = [name for name in forward_map.passed if name not in decoder_parameters and name not in in_kwargs]
    if not_taken:
        return (f"{library.__name__}.forward takes {', '.join(map(repr, not_taken))}, which "
                f"{decoder_cls.__name__}.forward does not")
    return None


_ROUTER_PARAMETER = "output_router_logits"
# what a mixture-of-experts causal LM's forward reads from itself to add the router's auxiliary loss
_ROUTER_ATTRIBUTES = ("num_experts", "num_experts_per_tok", "router_aux_loss_coef")


def _router_refusal(module: torch.nn.Module, library: type, forward_map: _ForwardMap, facts: CausalLMFacts
                    ) -> Optional[str]:
    """Why the router's auxiliary loss cannot be added as the library forward adds it, else None."""
    if not facts.router_aux_loss:
        return None
    if _ROUTER_PARAMETER not in forward_map.passed or "aux_loss" not in forward_map.output_fields:
        return f"{library.__name__}.forward takes no {_ROUTER_PARAMETER!r} or returns no 'aux_loss'"
    if _load_balancing_loss(library) is None:
        return f"{library.__module__} has no load_balancing_loss_func (the router's auxiliary loss)"
    missing = [name for name in _ROUTER_ATTRIBUTES if not hasattr(module, name)]
    if missing:
        return f"it has no {', '.join(missing)} (the router's auxiliary loss)"
    return None


def _load_balancing_loss(library: type) -> Optional[Callable]:
    """The family's own auxiliary-loss function, the one its forward calls."""
    return getattr(sys.modules.get(library.__module__), "load_balancing_loss_func", None)


def _standard_causal_lm_loss() -> Optional[Callable]:
    loss_utils = sys.modules.get("transformers.loss.loss_utils")
    return getattr(loss_utils, "ForCausalLMLoss", None)


class _FusedCausalLM:
    """Base of the causal-LM classes patch makes. The fused loss applies only to an instance of one
    (a forward captured before unpatch falls back to the library's), and an instance pickles (and
    deep-copies) by the :class:`_FusedClassKey` of its class, made again on loading."""

    def __reduce_ex__(self, protocol):
        return _patched_causal_lm_instance, (_FusedClassKey.of(type(self)),), self.__getstate__()


@dataclasses.dataclass(frozen=True)
class _FusedClassKey:
    """What a made causal-LM class is made from: the class patch replaced and the model's facts."""

    original: type
    facts: CausalLMFacts

    @staticmethod
    def of(made: type) -> "_FusedClassKey":
        return _FusedClassKey(made._tilegrad_original, made._tilegrad_facts)

    def made(self) -> type:
        return _fused_class(self.original, self.facts)


def _patched_causal_lm_instance(key: _FusedClassKey) -> torch.nn.Module:
    """Unpickling (or ``copy.deepcopy``) a patched causal LM: an empty instance of its made class; its
    state follows."""
    cls = key.made()
    return cls.__new__(cls)


@functools.lru_cache(maxsize=None)
def _fused_class(original: type, facts: CausalLMFacts) -> type:
    """The class patch gives a causal LM of class ``original``: for a transformers class, a subclass
    whose forward is the fused one; for a user's subclass of one, a class deriving from it and from
    that, so that ``original.forward`` runs and its ``super().forward`` reaches the fused forward. It
    keeps ``original``'s name: transformers writes ``type(model).__name__`` into a saved config."""
    library = _library_class(original)
    fused_library = _fused_library_class(library, facts)
    if original is library:
        return fused_library
    return _named_like(original, (original, fused_library), {"_tilegrad_original": original, "_tilegrad_facts": facts},
                       original.__doc__)


@functools.lru_cache(maxsize=None)
def _fused_library_class(library: type, facts: CausalLMFacts) -> type:
    namespace = {"forward": _fused_forward(library, facts, _forward_map(library)), "_tilegrad_original": library,
                 "_tilegrad_facts": facts, **_source_checks_of(library)}
    return _named_like(library, (_FusedCausalLM, library), namespace,
                       f"{library.__name__} whose training loss is tilegrad's fused linear cross entropy "
                       f"(made by tilegrad.torch.patch).")


# transformers' class methods that read the source file of the class's module (a made class's module
# is this one): whether attention / experts implementations can be switched (generate switches a
# mixture's experts to batched_mm for decoding)
_SOURCE_CHECKS = ("_can_set_attn_implementation", "_can_set_experts_implementation")


def _source_checks_of(library: type) -> Dict[str, classmethod]:
    """The library class's answers to transformers' source-reading checks, for the class made from it;
    and whether it is custom code (``is_custom_code``: a class outside ``transformers.``), answered for
    the class patch replaced (the library's, or a user's subclass of it): save_pretrained applies a
    family's checkpoint key renames to library classes only (GPT-NeoX's ``lm_head`` saved as
    ``embed_out``), so a patched model saves the unpatched model's keys."""
    def delegate(name: str) -> classmethod:
        return classmethod(lambda cls: getattr(library, name)())
    checks = {name: delegate(name) for name in _SOURCE_CHECKS if hasattr(library, name)}
    if hasattr(library, "is_custom_code"):
        checks["is_custom_code"] = classmethod(lambda cls: cls._tilegrad_original.is_custom_code())
    return checks


def _named_like(cls: type, bases: tuple, namespace: Dict[str, Any], doc: Optional[str]) -> type:
    return type(cls.__name__, bases, {**namespace, "__module__": __name__, "__qualname__": cls.__qualname__,
                                      "__doc__": doc})


def _fused_forward(library: type, facts: CausalLMFacts, forward_map: _ForwardMap) -> Callable:
    """The forward of the class patch makes from ``library``: in training with labels, the loss is a
    fused linear cross entropy from the final hidden states and ``logits`` is None; otherwise (and
    after unpatch) ``library.forward`` itself. It takes exactly what that forward takes, and shows its
    signature (``inspect.signature(model.forward)``: what transformers' Trainer reads to keep dataset
    columns)."""
    library_forward = library.forward
    standard_loss = _standard_causal_lm_loss()

    @functools.wraps(library_forward)
    def forward(self, *args, **kwargs):
        bound = forward_map.bind(args, kwargs)
        if bound is not None and _fused_loss_applies(self, facts, bound[0], standard_loss):
            return _fused_causal_lm_output(self, facts, forward_map, *bound)
        return library_forward(self, *args, **kwargs)
    return forward


def _fused_loss_applies(model: torch.nn.Module, facts: CausalLMFacts, named: Dict[str, Any],
                        standard_loss: Optional[Callable]) -> bool:
    """Only the plain training case of a patched model: labels, all positions, transformers' standard
    causal-LM loss, and an lm_head whose call is its weight and bias alone."""
    logits_to_keep = named["logits_to_keep"]
    return (isinstance(model, _FusedCausalLM) and model.training and named["labels"] is not None
            and isinstance(logits_to_keep, int) and logits_to_keep == 0
            and getattr(model, "loss_function", None) is standard_loss
            and _plain_linear(getattr(model, facts.head_name(model), None)))


# An lm_head the fused loss reads the weight and bias of: torch's, or ours once patch(linear=True) swapped it.
_LINEAR_CLASSES = (torch.nn.Linear, tnn.Linear)


def _plain_linear(module: Any) -> bool:
    """A torch.nn.Linear (or tilegrad's) with no forward hook (its own or global) and no forward set on
    the instance: the fused loss reads only its weight and bias, so it would skip them."""
    return (type(module) in _LINEAR_CLASSES and "forward" not in module.__dict__
            and not (module._forward_hooks or module._forward_pre_hooks)
            and not (_torch_module._global_forward_hooks or _torch_module._global_forward_pre_hooks))


def _fused_causal_lm_output(model: torch.nn.Module, facts: CausalLMFacts, forward_map: _ForwardMap,
                            named: Dict[str, Any], rest: Dict[str, Any]):
    """The decoder's outputs and the fused loss from its final hidden states, in the model's own output
    class with ``logits=None``, every other field the decoder returned carried over by name. With
    ``return_dict=False``: the tuple ``to_tuple()`` gives, with None kept at the logits' index so that
    every other value stands where the unpatched model puts it."""
    options = dict(rest)
    return_dict = options.pop("return_dict", None)
    if return_dict is None:
        return_dict = getattr(model.config, "return_dict", True)
    if facts.router_aux_loss and named[_ROUTER_PARAMETER] is None:  # as the library forward: the config's default
        named = {**named, _ROUTER_PARAMETER: model.config.output_router_logits}
    outputs = getattr(model, facts.decoder)(**{name: named[name] for name in forward_map.passed}, **options)
    loss = _fused_causal_lm_loss(*_head_input(model, facts, outputs.last_hidden_state), named["labels"],
                                 softcap=getattr(model.config, "final_logit_softcapping", None), **options)
    fields = {"loss": loss, "logits": None}
    if facts.router_aux_loss and named[_ROUTER_PARAMETER]:
        fields["aux_loss"] = aux_loss = _load_balancing_loss(forward_map.library)(
            outputs.router_logits, model.num_experts, model.num_experts_per_tok, named["attention_mask"])
        fields["loss"] = loss + model.router_aux_loss_coef * aux_loss.to(loss.device)
    values = {name: fields[name] if name in fields else getattr(outputs, name, None)
              for name in forward_map.output_fields}
    if return_dict:
        return forward_map.output_class(**values)
    return tuple(value for name, value in values.items() if value is not None or name == "logits")


def _head_input(model: torch.nn.Module, facts: CausalLMFacts, hidden: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """The hidden states, weight and bias whose product is the logits the model's loss sees: with a
    ``logits_divisor`` (``lm_head(h) / s``), ``h / s`` and ``bias / s`` (exact for a power of two)."""
    lm_head = getattr(model, facts.head_name(model))
    weight, bias = lm_head.weight, lm_head.bias
    if facts.logits_divisor is not None:
        divisor = getattr(model.config, facts.logits_divisor)
        hidden, bias = hidden / divisor, None if bias is None else bias / divisor
    return hidden, weight, bias


def _fused_causal_lm_loss(hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                          labels: torch.Tensor, *,
                          num_items_in_batch=None, ignore_index: int = -100, shift_labels=None,
                          softcap: Optional[float] = None, **_: Any) -> torch.Tensor:
    """transformers' ForCausalLMLoss (tokens < n predict n; mean over non-ignored tokens, or sum /
    num_items_in_batch; a float32 loss, as its upcast of the logits gives), with the logits formed
    block by block inside tilegrad's fused op (capped there by ``softcap``: the config's
    ``final_logit_softcapping``, Gemma 2 / 3)."""
    if shift_labels is None:
        # the label of position t is token t + 1; the last position has none (ignored), so hidden
        # stays whole and is never sliced or copied; padded after the slice, so the labels come out
        # contiguous in one op (the kernel takes them flat)
        shift_labels = F.pad(labels[..., 1:], (0, 1), value=ignore_index) if labels.shape[-1] else labels
    shift_labels = shift_labels.to(hidden.device).reshape(hidden.shape[:-1])
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = TF.linear_cross_entropy(hidden, weight, shift_labels, linear_bias=bias,
                                   reduction=reduction, ignore_index=ignore_index, loss_dtype=torch.float32,
                                   softcap=softcap)
    if num_items_in_batch is not None:
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def _plan_fused_loss(path: str, module: torch.nn.Module) -> Union[_ClassSwap, Skipped, None]:
    """The fused-loss class for a supported causal LM; a Skipped (with the reason) for a language
    model it cannot take; None for anything else or a model patched already (from any root)."""
    if not _looks_like_language_model(module) or isinstance(module, _FusedCausalLM):
        return None
    path = path or "<model>"
    facts = _causal_lm_facts(module)
    if not isinstance(facts, CausalLMFacts):
        return Skipped(path, _qualname(type(module)), facts)
    original = type(module)
    return _ClassSwap(module, original, _fused_class(original, facts), {},
                      Replacement(f"{path}.forward" if path != "<model>" else "forward", "logits + loss_function",
                                  _fused_loss_description(original)))


def _fused_loss_description(original: type) -> str:
    library = _library_class(original)
    own = [c for c in original.__mro__[:original.__mro__.index(library)] if "forward" in vars(c)]
    text = "tilegrad fused linear cross entropy (training with labels)"
    if own:
        text += (f"; {own[0].__name__}.forward runs and is fused where it calls {library.__name__}.forward "
                 f"through super()")
    return text


# ----------------------------------------------------------------------------------------------
# Hugging Face attention: the config's attention implementation set to tilegrad's


@dataclasses.dataclass
class _AttentionSwap:
    """``config._attn_implementation`` (shared by every module of a Hugging Face model) was ``old`` and
    is tilegrad's registered attention function; recorded on ``module``, the first module holding it."""

    module: torch.nn.Module
    config: Any
    old: Optional[str]
    replacement: Replacement
    sequence: int = dataclasses.field(default_factory=lambda: next(_sequence))

    def apply(self) -> None:
        self.config._attn_implementation = TA.register_with_transformers()

    def undo_problem(self) -> Optional[str]:
        return None

    def undo(self) -> None:
        # A choice made since patch (model.set_attn_implementation) is left alone.
        if self.config._attn_implementation == TA.HF_IMPLEMENTATION:
            self.config._attn_implementation = self.old


def _attention_refusal(config: Any, model: torch.nn.Module) -> Optional[str]:
    """Why the attention of this config (held by ``model``) is not tilegrad's to compute, else None."""
    softcap = getattr(config, "attn_logit_softcapping", None)
    if softcap is not None:
        return f"attn_logit_softcapping={softcap}: tilegrad's attention has no logit softcap"
    if getattr(config, "reorder_and_upcast_attn", False):  # GPT-2: its eager attention's own float32 path
        return ("reorder_and_upcast_attn=True: GPT-2 computes that attention itself (eager), not through an "
                "attention implementation")
    if _gpt2_scale_kept_from_attention_implementations(config, model):
        return ("scale_attn_by_inverse_layer_idx / scale_attn_weights: this transformers release's GPT-2 applies "
                "them in its eager attention only, and hands an attention implementation no scale")
    return None


def _gpt2_scale_kept_from_attention_implementations(config: Any, model: torch.nn.Module) -> bool:
    """GPT-2's attention scale is not 1 / sqrt(head_dim) (``scale_attn_weights`` off, or divided by the
    layer index) and its attention modules do not hand it on (transformers 5.0's have no ``scaling``)."""
    if getattr(config, "scale_attn_weights", True) and not getattr(config, "scale_attn_by_inverse_layer_idx", False):
        return False
    return any(hasattr(m, "scale_attn_by_inverse_layer_idx") and not hasattr(m, "scaling") for m in model.modules())


def _plan_attention(model: torch.nn.Module) -> Tuple[List[_AttentionSwap], List[Skipped]]:
    """One swap per config of a family in ``CAUSAL_LM_FACTS`` not on tilegrad's attention yet; a
    Skipped for one whose attention tilegrad's cannot compute (Gemma 2's logit softcap, GPT-2's
    reorder_and_upcast_attn)."""
    swaps: List[_AttentionSwap] = []
    skipped: List[Skipped] = []
    seen = set()
    for path, module in model.named_modules(remove_duplicate=True):
        config = module.__dict__.get("config")
        if id(config) in seen or getattr(config, "model_type", None) not in CAUSAL_LM_FACTS:
            continue
        seen.add(id(config))
        refusal = _attention_refusal(config, module)
        if refusal is not None:
            skipped.append(Skipped(f"{path or '<model>'}.config._attn_implementation", type(config).__name__,
                                   refusal + ", so the model's own attention runs"))
            continue
        old = getattr(config, "_attn_implementation", None)
        if old != TA.HF_IMPLEMENTATION:
            swaps.append(_AttentionSwap(module, config, old, Replacement(
                f"{path or '<model>'}.config._attn_implementation", repr(old),
                f"{TA.HF_IMPLEMENTATION!r} (tgt.scaled_dot_product_attention)")))
    return swaps, skipped


# ----------------------------------------------------------------------------------------------
# Hugging Face decoder layers: the residual add fused into the post-attention RMSNorm
#
# The families' decoder layers (transformers 5.0 .. 5.24) all compute
#     residual = h; h = input_layernorm(h); h, _ = self_attn(hidden_states=h, <each parameter>=<it>, **kwargs)
#     h = residual + h; residual = h; h = post_attention_layernorm(h); h = mlp(h); return residual + h
# and Tilegrad<Family>DecoderLayer runs that body with add_rms_norm for the middle add and norm, inside
# the library's own decorators (so its signature, argument renames and return type are kept). The
# library's source is compared with that body, statement for statement, before any layer is swapped:
# a release whose body differs is left as it was, and said.

_LAYER_BODY = """
residual = {h}
{h} = self.input_layernorm({h})
{h}, _ = self.self_attn(hidden_states={h}, {passed}**{kwargs})
{h} = residual + {h}
residual = {h}
{h} = self.post_attention_layernorm({h})
{h} = self.mlp({h})
{h} = residual + {h}
return {h}
"""


@dataclasses.dataclass(frozen=True)
class _LayerCall:
    """The library layer forward's named parameters after the hidden states: positional order, defaults."""

    positional: Tuple[str, ...]
    defaults: Dict[str, Any]

    def attention_kwargs(self, args: tuple, kwargs: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """What the library's forward hands ``self_attn`` for this call: each named parameter (its default
        when not given) and the rest of ``**kwargs``; None where it would not bind the call (its own
        forward then runs, and raises its own error)."""
        given = dict(zip(self.positional, args))
        if len(args) > len(self.positional) or any(name in kwargs for name in given):
            return None
        passed = {**self.defaults, **given, **kwargs}
        return None if any(v is inspect.Parameter.empty for v in passed.values()) else passed


def _decoder_layer_classes() -> List[type]:
    """The decoder-layer classes of the loaded families in CAUSAL_LM_FACTS whose layers are Llama's."""
    found: List[type] = []
    for model_type, facts in CAUSAL_LM_FACTS.items():
        if not facts.residual_add_norm:
            continue
        modeling = sys.modules.get(facts.modeling_module(model_type))
        cls = getattr(modeling, facts.prefix + "DecoderLayer", None)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            found.append(cls)
    return found


def _plain_norm_classes(library: type) -> Tuple[type, ...]:
    """The norms add_rms_norm computes for this layer class: its family's RMSNorm and tilegrad's subclass."""
    prefix = library.__name__[:-len("DecoderLayer")]
    norm_class = getattr(sys.modules.get(library.__module__), prefix + "RMSNorm", None)
    return (norm_class, _tilegrad_subclass(norm_class, "RMSNorm")) if isinstance(norm_class, type) else ()


def _statement_dumps(statements: List[Any]) -> List[str]:
    """``ast.dump`` of each statement, keyword arguments in name order (their order changes nothing)."""
    import ast
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                node.keywords.sort(key=lambda k: (k.arg is None, k.arg or ""))
    return [ast.dump(statement) for statement in statements]


@functools.lru_cache(maxsize=None)
def _layer_call(library: type) -> Union[_LayerCall, str]:
    """The library layer's forward read once; a reason (str) where its body is not the pattern fused here."""
    import ast
    import textwrap
    body = inspect.unwrap(library.forward)
    not_fused = f"{library.__name__}.forward is not the residual pattern tilegrad fuses"
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(body)))
    except (OSError, TypeError, SyntaxError):
        return f"the source of {library.__name__}.forward cannot be read"
    parameters = list(inspect.signature(body).parameters.values())[1:]
    var_keyword = [p.name for p in parameters if p.kind is p.VAR_KEYWORD]
    named = [p for p in parameters[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if (not parameters or parameters[0].kind is not parameters[0].POSITIONAL_OR_KEYWORD or not var_keyword
            or len(named) + 2 != len(parameters) or _rewrapped(library.forward, body, lambda *a, **k: None) is None):
        return not_fused
    statements = tree.body[0].body
    if statements and isinstance(statements[0], ast.Expr) and isinstance(statements[0].value, ast.Constant):
        statements = statements[1:]  # a docstring
    expected = _LAYER_BODY.format(h=parameters[0].name, passed="".join(f"{p.name}={p.name}, " for p in named),
                                  kwargs=var_keyword[0])
    if _statement_dumps(statements) != _statement_dumps(ast.parse(expected).body):
        return not_fused
    return _LayerCall(tuple(p.name for p in named if p.kind is p.POSITIONAL_OR_KEYWORD),
                      {p.name: p.default for p in named})


def _rewrapped(function: Any, body: Callable, replacement: Callable) -> Optional[Callable]:
    """``function`` (the library's forward: ``body`` inside its decorators) calling ``replacement`` where
    it called ``body``; None where a decorator does not hold the function it wraps in its closure."""
    if function is body:
        return functools.wraps(body)(replacement)
    inner = getattr(function, "__wrapped__", None)
    cells = getattr(function, "__closure__", None) or ()
    if not isinstance(function, types.FunctionType) or not any(_cell_holds(c, inner) for c in cells):
        return None
    new_inner = _rewrapped(inner, body, replacement)
    if new_inner is None:
        return None
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                              tuple(types.CellType(new_inner) if _cell_holds(c, inner) else c for c in cells))
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__dict__.update(function.__dict__)
    copy.__wrapped__ = new_inner
    copy.__qualname__ = function.__qualname__
    return copy


def _cell_holds(cell: Any, value: Any) -> bool:
    try:
        return value is not None and cell.cell_contents is value
    except ValueError:  # an empty cell
        return False


def _decoder_layer_forward(library: type) -> Callable:
    """The library's forward with its body run as ``_LAYER_BODY`` with one add_rms_norm (the library's
    own where its body is another, or a call does not bind)."""
    body = inspect.unwrap(library.forward)
    call = _layer_call(library)
    norm_classes = _plain_norm_classes(library)

    def forward(self, hidden_states, *args, **kwargs):
        passed = call.attention_kwargs(args, kwargs) if isinstance(call, _LayerCall) else None
        if passed is None:
            return body(self, hidden_states, *args, **kwargs)
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states=self.input_layernorm(hidden_states), **passed)
        hidden_states, residual = _residual_add_rms_norm(self.post_attention_layernorm, norm_classes, residual,
                                                         hidden_states)
        return residual + self.mlp(hidden_states)

    return _rewrapped(library.forward, body, forward) or library.forward


def _residual_add_rms_norm(norm: torch.nn.Module, norm_classes: Tuple[type, ...], residual: torch.Tensor,
                           x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(norm(residual + x), residual + x)``: one add_rms_norm where ``norm`` is the family's RMSNorm
    (or tilegrad's) with a weight of the sum's dtype and no hook, else the library's two steps."""
    if residual.dtype != x.dtype:  # autocast: torch's add promotes, and widening before it is exact
        dtype = torch.promote_types(residual.dtype, x.dtype)
        residual, x = residual.to(dtype), x.to(dtype)
    weight = getattr(norm, "weight", None)
    if (type(norm) in norm_classes and isinstance(weight, torch.Tensor) and weight.dtype == x.dtype
            and weight.dim() == 1 and residual.shape == x.shape and weight.shape[0] == x.shape[-1]
            and not (norm._forward_hooks or norm._forward_pre_hooks or _torch_module._global_forward_hooks
                     or _torch_module._global_forward_pre_hooks)):
        return _add_rms_norm.add_rms_norm(residual, x, weight, norm.variance_epsilon)
    h = residual + x
    return norm(h), h


def _plan_fused_residual_adds(model: torch.nn.Module) -> Tuple[List[_ClassSwap], List[Skipped]]:
    """A class swap for each decoder layer of a family in CAUSAL_LM_FACTS whose residual add can be fused,
    a Skipped (with the reason) for each that cannot; layers patched already are left out."""
    libraries = _decoder_layer_classes()
    changes: List[_ClassSwap] = []
    skipped: List[Skipped] = []
    for path, module in model.named_modules(remove_duplicate=True):
        library = next((c for c in type(module).__mro__ if c in libraries), None)
        if library is None or isinstance(module, _tilegrad_subclass(library, "DecoderLayer")):
            continue
        path = path or "<model>"
        reason = _layer_refusal(module, library)
        if reason is not None:
            skipped.append(Skipped(path, _qualname(type(module)), reason + "; its residual add is not fused"))
            continue
        made = _tilegrad_subclass(library, "DecoderLayer")
        changes.append(_ClassSwap(module, library, made, {}, Replacement(path, _qualname(library), _qualname(made))))
    return changes, skipped


def _layer_refusal(module: torch.nn.Module, library: type) -> Optional[str]:
    """Why this decoder layer's residual add cannot be fused, else None."""
    cls = type(module)
    if cls is not library:
        own = [c for c in cls.__mro__[:cls.__mro__.index(library)] if "forward" in vars(c)]
        return (f"{own[0].__name__} overrides {library.__name__}.forward" if own
                else f"{cls.__name__} is a subclass of {library.__name__}")
    if "forward" in module.__dict__:
        return "its forward is set on the instance"
    call = _layer_call(library)
    if isinstance(call, str):
        return call
    norm, plain = getattr(module, "post_attention_layernorm", None), _plain_norm_classes(library)
    if type(norm) not in plain or not isinstance(getattr(norm, "weight", None), torch.nn.Parameter):
        wanted = plain[0].__name__ if plain else "its family's RMSNorm"
        return f"its post_attention_layernorm is {type(norm).__name__}, not {wanted} with a weight"
    return None


# ----------------------------------------------------------------------------------------------
# public API: patch / unpatch


def _plan(model: torch.nn.Module, rules: Dict[type, Tuple[type, Dict[str, Any]]], fuse_causal_lm_loss: bool
          ) -> Tuple[List[_ClassSwap], List[Skipped]]:
    """Every change patch() would make, and what it would leave as it was; changes nothing."""
    changes: List[_ClassSwap] = []
    skipped: List[Skipped] = []
    for path, module in model.named_modules(remove_duplicate=True):
        swap = _plan_class_swap(path, module, rules)
        if swap is not None:
            changes.append(swap)
        planned = _plan_fused_loss(path, module) if fuse_causal_lm_loss else None
        if isinstance(planned, Skipped):
            skipped.append(planned)
        elif planned is not None:
            changes.append(planned)
    return changes, skipped


def _apply_all(changes: List[_ClassSwap]) -> None:
    """Apply every change, or (if one fails) none: the ones applied are undone before re-raising."""
    done: List[_ClassSwap] = []
    try:
        for change in changes:
            change.apply()
            _record(change)
            done.append(change)
    except BaseException:
        for change in reversed(done):
            change.undo()
            _unrecord(change)
        raise


def patch(model: torch.nn.Module, *, silu: bool = True, embedding: bool = True, cross_entropy: bool = True,
          binary_cross_entropy_with_logits: bool = True, linear_cross_entropy: bool = True,
          rms_norm: bool = True, swiglu: bool = True, rope: bool = True, attention: bool = True,
          linear: bool = True, layer_norm: bool = True, add_rms_norm: bool = True, gelu: bool = True,
          strict: bool = False) -> PatchSummary:
    """Switch the supported modules of a built model to tilegrad, in place, all or nothing.

    Args:
        model: any ``torch.nn.Module``; its submodules are walked once.
        silu: ``torch.nn.SiLU`` (and transformers' ``SiLUActivation``) -> ``tilegrad.torch.nn.SiLU``.
        embedding: ``torch.nn.Embedding`` -> ``tilegrad.torch.nn.Embedding`` (same Parameter), and
            Gemma's scaled token embedding on ``tgt.embedding``.
        cross_entropy: ``torch.nn.CrossEntropyLoss`` -> ``tilegrad.torch.nn.CrossEntropyLoss``.
        binary_cross_entropy_with_logits: ``torch.nn.BCEWithLogitsLoss`` -> tilegrad's.
        linear_cross_entropy: ``torch.nn.LinearCrossEntropyLoss`` -> tilegrad's, and the training loss
            of the transformers causal LMs in ``CAUSAL_LM_FACTS`` (and of user subclasses of them, where
            their forward calls ``super().forward``) as a fused linear cross entropy.
        rms_norm: ``torch.nn.RMSNorm`` -> ``tilegrad.torch.nn.RMSNorm``, and the RMSNorm modules of
            those families (``tgt.rms_norm``; Gemma's ``1 + weight`` form with ``weight_offset=1.0``).
        swiglu: their MLP's ``act_fn(gate_proj(x)) * up_proj(x)`` as ``tgt.silu_mul`` (SiLU) or
            ``tgt.gelu_mul`` (torch's GELU, Gemma's ``gelu_pytorch_tanh``; other activations keep it), a
            one-projection MLP's or a mixture's experts' ``act(gate) * up`` as ``tgt.swiglu`` (SiLU only).
        rope: their attention's rotary embedding as ``tgt.apply_rotary_pos_emb``.
        attention: their attention as ``tgt.scaled_dot_product_attention`` (the config's
            ``_attn_implementation`` set to ``"tilegrad"``, registered with transformers' attention
            interface; :func:`unpatch` restores the model's own choice). A config with an attention
            logit softcap (Gemma 2's ``attn_logit_softcapping``) or GPT-2's ``reorder_and_upcast_attn``
            (a path of its own under eager attention; also its ``scale_attn_by_inverse_layer_idx`` where
            the installed transformers hands that scale to eager attention only) keeps its own
            attention, listed in ``skipped`` and warned about (``strict`` does not refuse it: the loss
            is still fused).
        linear: ``torch.nn.Linear`` (also inside PEFT's LoRA layers: ``base_layer``, ``lora_A``,
            ``lora_B``) -> ``tilegrad.torch.nn.Linear`` (float32 GEMMs on oneDNN; same Parameters), and
            transformers' ``Conv1D`` (GPT-2's layers) -> ``TilegradConv1D`` (``tgt.linear`` on the weight
            read transposed; same Parameters).
        layer_norm: ``torch.nn.LayerNorm`` (GPT-2's and GPT-NeoX's norms among them) ->
            ``tilegrad.torch.nn.LayerNorm`` (same Parameters).
        gelu: GPT-2's and GPT-NeoX's MLP activation (``gelu_new`` / ``gelu_pytorch_tanh``: tanh form;
            ``gelu``: erf) as ``tgt.gelu``; other activations keep the model's own MLP.
        add_rms_norm: in those families' decoder layers, ``residual + attention output`` and the
            post-attention RMSNorm as one ``tgt.add_rms_norm`` (the layer's class swapped for
            ``Tilegrad<Family>DecoderLayer``; a layer whose class overrides ``forward`` is left as it
            was, and said).
        strict: raise ``ValueError`` (changing nothing) where patch would leave a language model's
            loss or a decoder layer's residual add unfused, instead of warning.

    Returns:
        A :class:`PatchSummary` (printable) of what was replaced and, in ``skipped``, what was left as
        it was with the reason (each also said in one ``UserWarning``). Patching again only adds what
        is new; :func:`unpatch` undoes every patch inside this model.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"patch: model must be a torch.nn.Module, got {type(model).__name__}")
    for name, value in (("silu", silu), ("embedding", embedding), ("cross_entropy", cross_entropy),
                        ("binary_cross_entropy_with_logits", binary_cross_entropy_with_logits),
                        ("linear_cross_entropy", linear_cross_entropy), ("rms_norm", rms_norm), ("swiglu", swiglu),
                        ("rope", rope), ("attention", attention), ("linear", linear), ("layer_norm", layer_norm),
                        ("add_rms_norm", add_rms_norm), ("gelu", gelu),
                        ("strict", strict)):
        if not isinstance(value, bool):
            raise TypeError(f"patch: {name} must be True or False, got {value!r}")
    rules = _swap_rules(silu, embedding, cross_entropy, binary_cross_entropy_with_logits, linear_cross_entropy,
                        rms_norm, linear, layer_norm)
    rules.update(_decoder_block_rules(rms_norm, swiglu, rope, embedding, gelu))
    changes, skipped = _plan(model, rules, linear_cross_entropy)
    if add_rms_norm:
        fused_layers, unfused_layers = _plan_fused_residual_adds(model)
        changes, skipped = changes + fused_layers, skipped + unfused_layers
    unmapped_attention: List[Skipped] = []
    if attention and "transformers" in sys.modules:  # never import transformers ourselves
        swaps, unmapped_attention = _plan_attention(model)
        changes += swaps
    if strict and skipped:
        raise ValueError("patch: strict=True and these would be left as they are (nothing was patched): "
                         + "; ".join(map(str, skipped)))
    skipped += unmapped_attention  # the model's own attention runs: said, but not a loss left unfused
    _apply_all(changes)
    for item in skipped:
        warnings.warn(f"tilegrad.torch.patch: {item}; left as it was", UserWarning, stacklevel=2)
    return PatchSummary([c.replacement for c in changes], skipped=skipped)


def unpatch(model: torch.nn.Module) -> PatchSummary:
    """Undo every :func:`patch` inside ``model`` (made from this model, a submodule or a container of
    it): original classes, attributes and forward methods, newest first.

    A parametrization registered after ``patch`` is kept, over the original class. If a module's
    class was changed since in a way that cannot be undone, ``RuntimeError`` names it and nothing is
    restored. Returns a :class:`PatchSummary` of what was restored (empty if nothing was patched).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"unpatch: model must be a torch.nn.Module, got {type(model).__name__}")
    records = sorted((r for m in model.modules() for r in m.__dict__.get(_RECORDS_ATTR, ())),
                     key=lambda r: r.sequence, reverse=True)
    problems = [f"{r.replacement.path}: {p}" for r in records for p in [r.undo_problem()] if p]
    if problems:
        raise RuntimeError("unpatch: cannot restore (nothing was changed): " + "; ".join(problems))
    for record in records:
        record.undo()
        _unrecord(record)
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
