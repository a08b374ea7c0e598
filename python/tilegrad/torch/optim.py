"""``tilegrad.torch.optim.AdamW``: a drop-in for ``torch.optim.AdamW`` on CPU, one fused pass.

    opt = tgt.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, max_grad_norm=1.0)
    loss.backward(); opt.step(); opt.zero_grad()          # opt.last_grad_norm for logging

Same constructor arguments, defaults and argument checks, param groups, LR schedulers, hooks and
``state_dict`` keys as ``torch.optim.AdamW`` (either optimizer loads the other's state dict). Each
param group is one call of ``tilegrad.fused_adamw`` (CANN ``aclnnFusedAdamw``) per param dtype:
every float32 / float16 / bfloat16 tensor of the group updated in one parallel region split by
bytes, in float32 with each result rounded once. Complex params are stepped as their
``torch.view_as_real`` views, as torch does. float64 params (and complex128) take a float64 path of
torch ops in ``torch.optim.AdamW``'s own order, so they match torch's result to the bit. Results are
bit-identical for any thread count.

As torch's AdamW: a parameter listed twice in a group is stepped twice (torch warns at
construction); with ``fused=True``, ``found_inf`` / ``grad_scale`` set on the optimizer (as
``torch.amp.GradScaler`` does) skip the step when ``found_inf == 1`` and otherwise divide the grads
by ``grad_scale`` in place before the update.

Extensions:

* ``max_grad_norm``: ``torch.nn.utils.clip_grad_norm_(opt_params, max_grad_norm)`` fused in: ONE
  gradient norm over every param of every group (a read pass summed in a fixed order), the clip
  applied inside the update. The grads themselves are left unscaled. The norm (before clipping) is
  ``opt.last_grad_norm``. A NaN norm makes every param NaN, as clip_grad_norm_ + AdamW does.
* ``master_weights=True``: for float16/bfloat16 params, float32 master copies and float32 moments;
  every update is the float32 update rounded once into the 16-bit param. State per parameter:
  2 (param) + 4 (master) + 4 + 4 (moments) = 14 bytes for bfloat16 params, against 6 for
  ``torch.optim.AdamW`` (moments in bfloat16); each step moves 28 bytes per parameter.
  The 16-bit param stays the truth: a param written outside the optimizer since its last step
  (``model.load_state_dict``, ``p.clamp_``, ``p.copy_``: anything that bumps ``p._version``) has
  its master re-seeded before the next update wherever it no longer equals the master rounded to 16
  bits (those elements take the 16-bit value widened; the others keep their float32 master). Writes
  that bypass the version counter (through ``p.data`` or a NumPy view) are not seen.
"""

import math
from typing import Optional

import numpy as np
import torch

from .. import _core
from ._tensor import as_numpy, sync_threads

__all__ = ["AdamW"]

_NAME = "tilegrad.torch.optim.AdamW"
_LOW = (torch.float16, torch.bfloat16)
# Real dtypes of the fused kernel; float64 takes the float64 path (complex params count as their real view).
_KERNEL = (torch.float32, torch.float16, torch.bfloat16)
_PARAM_DTYPES = _KERNEL + (torch.float64, torch.complex64, torch.complex128)
# Instance attributes beyond torch's Optimizer state: kept by copy.deepcopy and pickle, with their defaults.
_EXTRA_ATTRS = {"max_grad_norm": None, "master_weights": False, "last_grad_norm": None}
_TENSOR_LR_FOREACH = "lr as a Tensor is not supported for capturable=False and foreach=True"


def _number(x) -> float:
    return float(x.item()) if isinstance(x, torch.Tensor) else float(x)


def _to_scalar(x):
    """A 1-element tensor hyperparameter as a 0-dim tensor (torch keeps tensor betas / lr that way)."""
    return x.squeeze() if isinstance(x, torch.Tensor) and x.dim() != 0 else x


def _real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t) if t.is_complex() else t


def _check_constructor_args(lr, betas, eps, weight_decay, foreach, capturable, differentiable, fused, max_grad_norm):
    """torch.optim.AdamW's checks, in its order, types and messages (prefixed), then tilegrad's refusals."""
    if isinstance(lr, torch.Tensor):
        if foreach and not capturable:
            raise ValueError(f"{_NAME}: {_TENSOR_LR_FOREACH}; pass foreach=False or a float lr")
        if lr.numel() != 1:
            raise ValueError(f"{_NAME}: Tensor lr must be 1-element, got shape {tuple(lr.shape)}")
    if not 0.0 <= _number(lr):
        raise ValueError(f"{_NAME}: Invalid learning rate: {lr} (lr must be >= 0)")
    if not 0.0 <= eps:
        raise ValueError(f"{_NAME}: Invalid epsilon value: {eps} (eps must be >= 0)")
    for i in (0, 1):
        if not 0.0 <= _number(betas[i]) < 1.0:
            raise ValueError(f"{_NAME}: Invalid beta parameter at index {i}: {betas[i]} (betas must be in [0, 1))")
    if not 0.0 <= weight_decay:
        raise ValueError(f"{_NAME}: Invalid weight_decay value: {weight_decay} (weight_decay must be >= 0)")
    tensors = [isinstance(b, torch.Tensor) for b in betas]
    if not (all(tensors) or all(isinstance(b, float) for b in betas)):
        raise ValueError(f"{_NAME}: betas must be either both floats or both Tensors, got {betas}")
    for i, is_tensor in enumerate(tensors):
        if is_tensor and foreach and not capturable:
            raise ValueError(f"{_NAME}: betas[{i}] as a Tensor is not supported for capturable=False and "
                             "foreach=True; pass foreach=False or float betas")
        if is_tensor and betas[i].numel() != 1:
            raise ValueError(f"{_NAME}: Tensor betas[{i}] must be 1-element, got shape {tuple(betas[i].shape)}")
    if fused and differentiable:
        raise RuntimeError(f"{_NAME}: `fused` does not support `differentiable`")
    if fused and foreach:
        raise RuntimeError(f"{_NAME}: `fused` and `foreach` cannot be `True` together.")
    if capturable:
        raise ValueError(f"{_NAME}: capturable must be False (CUDA graph capture has no meaning on the CPU), got True")
    if differentiable:
        raise ValueError(f"{_NAME}: differentiable must be False (the fused step is not differentiable), got True; "
                         "use torch.optim.AdamW for autograd through the step")
    if max_grad_norm is not None and not float(max_grad_norm) >= 0:
        raise ValueError(f"{_NAME}: max_grad_norm must be >= 0 or None, got {max_grad_norm}")


def _check_group(group, index: int) -> None:
    """The kernel's hyperparameter rules, checked for every group before anything is written."""
    beta1, beta2 = group["betas"]
    for key, value in (("lr", group["lr"]), ("betas[0]", beta1), ("betas[1]", beta2),
                       ("weight_decay", group["weight_decay"])):
        if not _number(value) >= 0:  # NaN fails too
            raise ValueError(f"{_NAME}: {key} must be >= 0, got {_number(value)} (param_groups[{index}])")
    if group["foreach"] and torch.is_tensor(group["lr"]) and not group["capturable"]:
        raise RuntimeError(f"{_NAME}: {_TENSOR_LR_FOREACH} (param_groups[{index}]); set foreach=False")


def _check_param(p: torch.Tensor, fused: bool) -> None:
    grad = p.grad
    if grad.is_sparse:
        raise RuntimeError(f"{_NAME} does not support sparse gradients, please consider torch.optim.SparseAdam instead")
    if fused and not (p.device.type == "cpu" and torch.is_floating_point(p)):
        raise RuntimeError(f"{_NAME}: `fused=True` requires all the params to be floating point Tensors of supported "
                           f"devices: ['cpu'] but {p.dtype} and {p.device.type}")
    if p.device.type != "cpu" or grad.device.type != "cpu":
        raise ValueError(f"{_NAME}: params and grads must be on the CPU, got param on {p.device}, grad on "
                         f"{grad.device}; move the model to the CPU or use torch.optim.AdamW")
    if p.dtype not in _PARAM_DTYPES:
        raise ValueError(f"{_NAME}: params must be float32, float16, bfloat16, float64, complex64 or complex128, "
                         f"got {p.dtype}")
    if grad.dtype != p.dtype:
        raise ValueError(f"{_NAME}: grad dtype {grad.dtype} != param dtype {p.dtype}; give each param a grad of "
                         "its own dtype")


def _one_element(t: Optional[torch.Tensor], name: str) -> Optional[float]:
    """The value of an optional one-element tensor (None or empty: absent, the vendor's rule)."""
    if t is None or t.numel() == 0:
        return None
    if t.numel() != 1:
        raise ValueError(f"{_NAME}: {name} must hold one element, got shape {tuple(t.shape)}")
    return _number(t.reshape(()))


def _rounds(items):
    """Items split so that no round lists a param twice: torch steps a repeated param once per listing,
    one after the other, and one kernel call must not see the same memory twice."""
    rounds, seen = [], {}
    for p, state in items:
        k = seen.get(id(p), 0)
        seen[id(p)] = k + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append((p, state))
    return rounds


def _unique_grads(items):
    return list({id(p.grad): p.grad for p, _ in items}.values())


def _real_numpy(t: torch.Tensor) -> np.ndarray:
    """The NumPy view the kernel takes of ``t`` (complex: of its real view)."""
    return as_numpy(_real(t))


def _global_grad_norm(grads) -> float:
    """The L2 norm of every grad (their NumPy views): the kernel's fixed-order sum for its dtypes,
    NumPy's pairwise float64 sum for float64 (both independent of the thread count)."""
    kernel = [g for g in grads if g.dtype != np.float64]
    wide = [g for g in grads if g.dtype == np.float64]
    norm = _core.adamw_grad_norm(kernel) if kernel else 0.0
    if not wide:
        return norm
    return math.sqrt(norm * norm + sum(float(np.sum(np.square(g))) for g in wide))


def _clip_coefficient(max_norm: float, norm: float) -> float:
    """torch.nn.utils.clip_grad_norm_'s coefficient in float64 (a NaN norm gives NaN)."""
    coef = max_norm / (norm + 1e-6)
    return coef if math.isnan(coef) else min(coef, 1.0)


def _wide_update(p: torch.Tensor, state, group, clip_coef: Optional[float]) -> None:
    """One AdamW step of a float64 (or complex128) param in torch.optim.AdamW's single-tensor order, op
    for op (torch ops, the same hyperparameter objects), so the result is torch's to the bit."""
    param, grad = _real(p), _real(p.grad)
    exp_avg, exp_avg_sq = _real(state["exp_avg"]), _real(state["exp_avg_sq"])
    if clip_coef is not None:
        grad = grad * clip_coef
    if group["maximize"]:
        grad = -grad
    lr, beta1, beta2 = _to_scalar(group["lr"]), _to_scalar(group["betas"][0]), _to_scalar(group["betas"][1])
    state["step"] += 1
    if group["weight_decay"] != 0:
        param.mul_(1 - lr * group["weight_decay"])
    exp_avg.lerp_(grad, 1 - (beta1.to(param.dtype) if torch.is_tensor(beta1) else beta1))
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    t = state["step"].item()
    step_size = lr / (1 - beta1 ** t)
    second = exp_avg_sq
    if group["amsgrad"]:
        second = _real(state["max_exp_avg_sq"])
        torch.maximum(second, exp_avg_sq, out=second)
    denom = (second.sqrt() / (1 - beta2 ** t) ** 0.5).add_(group["eps"])
    param.addcdiv_(exp_avg, denom, value=-step_size)


class AdamW(torch.optim.Optimizer):
    """AdamW as ``torch.optim.AdamW``, fused on the CPU (see the module docstring).

    ``foreach`` and ``fused`` are accepted with torch's checks (there is one fused path either way;
    ``fused=True`` also takes ``found_inf`` / ``grad_scale`` from ``torch.amp.GradScaler``);
    ``capturable=True`` (CUDA graphs) and ``differentiable=True`` (autograd through the step) are
    refused with a ValueError. Sparse grads raise RuntimeError like torch's; tensors off the CPU
    raise ValueError (RuntimeError with ``fused=True``, as torch's fused check).

    Args (beyond torch's):
        max_grad_norm: clip every step with one global gradient norm (see the module docstring).
        master_weights: float32 master copies and moments for 16-bit params.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None,
                 max_grad_norm: Optional[float] = None, master_weights: bool = False):
        _check_constructor_args(lr, betas, eps, weight_decay, foreach, capturable, differentiable, fused,
                                max_grad_norm)
        defaults = dict(lr=lr, betas=(_to_scalar(betas[0]), _to_scalar(betas[1])), eps=eps,
                        weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=False, differentiable=False, fused=fused, decoupled_weight_decay=True)
        super().__init__(params, defaults)
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.master_weights = bool(master_weights)
        self.last_grad_norm: Optional[float] = None
        self._init_private()

    def _init_private(self) -> None:
        # torch.amp.GradScaler hands found_inf / grad_scale to an optimizer that says so (torch: fused=True).
        self._step_supports_amp_scaling = bool(self.defaults.get("fused"))
        # p._version right after this optimizer last wrote each master-weights param.
        self._written_versions = {}

    def __getstate__(self):
        state = super().__getstate__()
        state.update({key: getattr(self, key) for key in _EXTRA_ATTRS})
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        for key, default in _EXTRA_ATTRS.items():
            self.__dict__.setdefault(key, default)
        self._init_private()
        for group in self.param_groups:
            for key, default in (("amsgrad", False), ("maximize", False), ("foreach", None), ("fused", None),
                                 ("capturable", False), ("differentiable", False)):
                group.setdefault(key, default)
            group["decoupled_weight_decay"] = True

    def _uses_master(self, p: torch.Tensor) -> bool:
        return self.master_weights and p.dtype in _LOW

    def _state_of(self, group, p: torch.Tensor):
        """p's state, created on first use; the step as a float32 tensor (a loaded float64 or plain
        number step included); a master-weights param's master re-seeded if p changed outside."""
        _check_param(p, bool(group["fused"]))
        state = self.state[p]
        master = self._uses_master(p)
        if len(state) == 0:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            like = torch.float32 if master else p.dtype
            for key in ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ()):
                state[key] = torch.zeros_like(p, dtype=like, memory_format=torch.preserve_format)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = torch.zeros_like(state["exp_avg_sq"])
        step = state["step"]
        if not torch.is_tensor(step) or step.dtype != torch.float32 or step.device.type != "cpu":
            state["step"] = torch.tensor(_number(step), dtype=torch.float32)
        if master:
            self._sync_master(p, state)
        return state

    def _sync_master(self, p: torch.Tensor, state) -> None:
        if "master_param" not in state:
            state["master_param"] = p.detach().to(torch.float32, copy=True)
        elif self._written_versions.get(p) != p._version:
            master = state["master_param"]
            changed = master.to(p.dtype) != p.detach()
            if bool(changed.any()):
                master.copy_(torch.where(changed, p.detach().to(torch.float32), master))

    # Per group: (params with a grad and their states) in group order, repeats included.
    def _plans(self):
        plans = []
        for index, group in enumerate(self.param_groups):
            with_grad = [p for p in group["params"] if p.grad is not None]
            if with_grad:
                _check_group(group, index)
            plans.append((group, [(p, self._state_of(group, p)) for p in with_grad]))
        return plans

    @torch.no_grad()
    def step(self, closure=None):
        """One AdamW step over every param with a grad (the others are skipped, as torch does)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        sync_threads()
        plans = self._plans()
        if _one_element(getattr(self, "found_inf", None), "found_inf") == 1.0:
            return loss  # torch's fused step: nothing written, the steps unchanged
        grads = _unique_grads([item for _, items in plans for item in items])
        grad_scale = _one_element(getattr(self, "grad_scale", None), "grad_scale")
        if grad_scale is not None and grads:
            torch._foreach_div_(grads, grad_scale)  # torch's fused step leaves the grads unscaled too
        # each grad's NumPy view, made once for the norm and the update
        grad_views = {id(g): _real_numpy(g) for g in grads}
        norm = None
        if self.max_grad_norm is not None:
            norm = _global_grad_norm(list(grad_views.values())) if grads else 0.0
        self.last_grad_norm = norm
        for group, items in plans:
            self._run_group(group, items, norm, grad_views)
        return loss

    def _run_group(self, group, items, norm: Optional[float], grad_views) -> None:
        buckets = {}
        for p, state in items:
            master = self._uses_master(p)
            buckets.setdefault((master, _real(p).dtype), []).append((p, state))
        for (master, dtype), bucket in buckets.items():
            for round_items in _rounds(bucket):
                if dtype in _KERNEL:
                    self._run_kernel(group, master, round_items, norm, grad_views)
                else:
                    coef = None if norm is None else _clip_coefficient(self.max_grad_norm, norm)
                    for p, state in round_items:
                        _wide_update(p, state, group, coef)
                if master:
                    self._written_versions.update((p, p._version) for p, _ in round_items)

    def _run_kernel(self, group, master: bool, items, norm: Optional[float], grad_views) -> None:
        """One fused_adamw call. A NaN global norm cannot be handed over (the binding reads a NaN
        grad_norm as "not given"), so it goes in as a NaN grad scale: every update NaN, as
        clip_grad_norm_'s NaN coefficient makes them."""
        beta1, beta2 = group["betas"]
        amsgrad = bool(group["amsgrad"])
        nan_norm = norm is not None and math.isnan(norm)
        steps = [_real_numpy(s["step"]) for _, s in items]
        _core.fused_adamw(
            params=[_real_numpy(s["master_param"]) if master else _real_numpy(p) for p, s in items],
            grads=[grad_views[id(p.grad)] for p, _ in items],
            exp_avgs=[_real_numpy(s["exp_avg"]) for _, s in items],
            exp_avg_sqs=[_real_numpy(s["exp_avg_sq"]) for _, s in items],
            max_exp_avg_sqs=[_real_numpy(s["max_exp_avg_sq"]) for _, s in items] if amsgrad else None,
            state_steps=steps,
            lr=_number(group["lr"]), beta1=_number(beta1), beta2=_number(beta2),
            weight_decay=float(group["weight_decay"]), eps=float(group["eps"]), amsgrad=amsgrad,
            maximize=bool(group["maximize"]),
            grad_scale=np.full(1, np.nan, dtype=np.float32) if nan_norm else None,
            max_grad_norm=None if nan_norm else self.max_grad_norm,
            model_params=[_real_numpy(p) for p, _ in items] if master else None,
            grad_norm=None if nan_norm else norm)
        # The vendor's convention: the kernel used t = step + 1; now the step is t, as torch keeps it.
        # Added through the NumPy views (torch's _foreach_add_ on the CPU runs an add, a cast and a
        # copy per 0-d step tensor); float32 + 1, as torch's add_ computes it.
        for step in steps:
            np.add(step, np.float32(1), out=step)

    def load_state_dict(self, state_dict):
        """torch's loader (it casts every state tensor but ``step`` to its param's dtype), then, with
        ``master_weights``, the float32 moments and master copies of 16-bit params put back from the
        given dict (a torch.optim.AdamW state dict holds 16-bit moments: they are widened). A param
        without a saved master gets one from its value at the next step, so loading the model
        before or after the optimizer gives the same result."""
        saved = state_dict["state"]
        saved_ids = [i for g in state_dict["param_groups"] for i in g["params"]]
        super().load_state_dict(state_dict)
        self._written_versions.clear()
        if not self.master_weights:
            return
        params = [p for g in self.param_groups for p in g["params"]]
        for pid, p in zip(saved_ids, params):
            if pid not in saved or p.dtype not in _LOW:
                continue
            state = self.state[p]
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "master_param"):
                if key in saved[pid]:
                    state[key] = saved[pid][key].detach().to(device=p.device, dtype=torch.float32, copy=True)
