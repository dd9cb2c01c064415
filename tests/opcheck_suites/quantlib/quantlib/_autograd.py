"""Autograd formulas (scale_rows is the only differentiable op)."""

import torch


def _scale_rows_setup_context(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x, scale)


def _scale_rows_backward(ctx, grad):
    x, scale = ctx.saved_tensors
    grad_x = grad_scale = None
    if ctx.needs_input_grad[0]:
        grad_x = torch.ops.quantlib.scale_rows(grad, scale).to(x.dtype)
    if ctx.needs_input_grad[1]:
        grad_scale = (grad * x).sum(dim=1).to(scale.dtype)
    return grad_x, grad_scale


torch.library.register_autograd(
    "quantlib::scale_rows", _scale_rows_backward, setup_context=_scale_rows_setup_context
)
