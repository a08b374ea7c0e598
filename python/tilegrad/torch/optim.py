"""``tilegrad.torch.optim.AdamW``: a drop-in for ``torch.optim.AdamW`` on CPU, one fused pass.

    opt = tgt.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, max_grad_norm=1.0)
    loss.backward(); opt.step(); opt.zero_grad()          # opt.last_grad_norm for logging

Same constructor arguments and defaults, param groups, LR schedulers and ``state_dict`` keys as
``torch.optim.AdamW`` (either optimizer loads the other's state dict). Each param group is one call
of ``tilegrad.fused_adamw`` (CANN ``aclnnFusedAdamw``): every tensor of the group updated in one
parallel region split by bytes, in float32 with each result rounded once. Results are bit-identical
for any thread count.

Extensions:

* ``max_grad_norm``: ``torch.nn.utils.clip_grad_norm_(params, max_grad_norm)`` fused in: the global
  gradient norm in one read pass (summed in a fixed order), the clip applied inside the update.
  The grads themselves are left unscaled. The norm (before clipping) is ``opt.last_grad_norm``.
* ``master_weights=True``: for float16/bfloat16 params, float32 master copies and float32 moments;
  every update is the float32 update rounded once into the 16-bit param. State per parameter:
  2 (param) + 4 (master) + 4 + 4 (moments) = 14 bytes for bfloat16 params, against 6 for
  ``torch.optim.AdamW`` (moments in bfloat16); each step moves 28 bytes per parameter.
"""

from typing import Optional

import torch

from .. import _core
from ._tensor import as_numpy
from ._threads import sync_threads

__all__ = ["AdamW"]

_LOW = (torch.float16, torch.bfloat16)
_KERNEL = (torch.float32, torch.float16, torch.bfloat16)


def _number(x) -> float:
    return float(x.item()) if isinstance(x, torch.Tensor) else float(x)


class AdamW(torch.optim.Optimizer):
    """AdamW as ``torch.optim.AdamW``, fused on the CPU (see the module docstring).

    ``foreach`` and ``fused`` are accepted and ignored (there is one path); ``capturable=True``
    (CUDA graphs) and ``differentiable=True`` (autograd through the step) are refused with a
    ValueError. Sparse and complex grads, and tensors off the CPU, raise like torch's CPU-fused path.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None,
                 max_grad_norm: Optional[float] = None, master_weights: bool = False):
        if isinstance(lr, torch.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= _number(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= _number(betas[0]) < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= _number(betas[1]) < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if capturable:
            raise ValueError("tilegrad.torch.optim.AdamW: capturable must be False (CUDA graph capture has no "
                             "meaning on the CPU), got True")
        if differentiable:
            raise ValueError("tilegrad.torch.optim.AdamW: differentiable must be False (the fused step is not "
                             "differentiable), got True")
        if max_grad_norm is not None and not float(max_grad_norm) >= 0:
            raise ValueError(f"tilegrad.torch.optim.AdamW: max_grad_norm must be >= 0 or None, got {max_grad_norm}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=False, differentiable=False, fused=fused,
                        decoupled_weight_decay=True)
        super().__init__(params, defaults)
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.master_weights = bool(master_weights)
        self.last_grad_norm: Optional[float] = None

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group["decoupled_weight_decay"] = True

    def _uses_master(self, p: torch.Tensor) -> bool:
        return self.master_weights and p.dtype in _LOW

    def _state_of(self, group, p: torch.Tensor):
        if p.grad.is_sparse:
            raise RuntimeError("AdamW does not support sparse gradients, please consider SparseAdam instead")
        if p.device.type != "cpu" or p.grad.device.type != "cpu":
            raise ValueError(f"tilegrad.torch.optim.AdamW: params and grads must be on the CPU, got {p.device}")
        if p.dtype not in _KERNEL or torch.is_complex(p):
            raise ValueError(f"tilegrad.torch.optim.AdamW: params must be float32, float16 or bfloat16, got {p.dtype}")
        if p.grad.dtype != p.dtype:
            raise ValueError(f"tilegrad.torch.optim.AdamW: grad dtype {p.grad.dtype} != param dtype {p.dtype}")
        state = self.state[p]
        master = self._uses_master(p)
        if len(state) == 0:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            like = torch.float32 if master else p.dtype
            state["exp_avg"] = torch.zeros_like(p, dtype=like, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, dtype=like, memory_format=torch.preserve_format)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = torch.zeros_like(p, dtype=like, memory_format=torch.preserve_format)
        if master and "master_param" not in state:
            state["master_param"] = p.detach().to(torch.float32, copy=True)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = torch.zeros_like(state["exp_avg_sq"])
        if not torch.is_tensor(state["step"]):
            state["step"] = torch.tensor(float(state["step"]), dtype=torch.float32)
        return state

    # One kernel call per (group, kind): float32 / 16-bit params with their own states, and the
    # master-weights params of each 16-bit dtype.
    def _calls(self):
        calls = []
        for group in self.param_groups:
            buckets = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._state_of(group, p)
                key = (self._uses_master(p), p.dtype)
                buckets.setdefault(key, []).append((p, state))
            for (master, _), items in buckets.items():
                calls.append((group, master, items))
        return calls

    @torch.no_grad()
    def step(self, closure=None):
        """One AdamW step over every param with a grad (the others are skipped, as torch does)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        sync_threads()
        calls = self._calls()
        clip = self.max_grad_norm
        norm = None
        if clip is not None and len(calls) > 1:
            norm = _core.adamw_grad_norm([as_numpy(p.grad) for _, _, items in calls for p, _ in items])
        self.last_grad_norm = norm
        for group, master, items in calls:
            got = self._run(group, master, items, clip, norm)
            if clip is not None and norm is None:
                self.last_grad_norm = got
        if clip is not None and not calls:
            self.last_grad_norm = 0.0
        return loss

    def _run(self, group, master, items, clip, norm):
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        params = [as_numpy(s["master_param"]) if master else as_numpy(p) for p, s in items]
        got = _core.fused_adamw(
            params, [as_numpy(p.grad) for p, _ in items], [as_numpy(s["exp_avg"]) for _, s in items],
            [as_numpy(s["exp_avg_sq"]) for _, s in items],
            [as_numpy(s["max_exp_avg_sq"]) for _, s in items] if amsgrad else None,
            [as_numpy(s["step"]) for _, s in items], _number(group["lr"]), _number(beta1), _number(beta2),
            float(group["weight_decay"]), float(group["eps"]), bool(amsgrad), bool(group["maximize"]),
            None, None, clip, [as_numpy(p) for p, _ in items] if master else None, norm)
        # The vendor's convention: the kernel used t = step + 1; now the step is t, as torch keeps it.
        torch._foreach_add_([s["step"] for _, s in items], 1)
        return got

    def load_state_dict(self, state_dict):
        """torch's loader (it casts every state tensor to its param's dtype), then, with
        ``master_weights``, the float32 moments and master copies of 16-bit params put back from the
        given dict (a torch.optim.AdamW state dict holds 16-bit moments: they are widened)."""
        saved = state_dict["state"]
        saved_ids = [i for g in state_dict["param_groups"] for i in g["params"]]
        super().load_state_dict(state_dict)
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
            if "master_param" not in state:
                state["master_param"] = p.detach().to(torch.float32, copy=True)
