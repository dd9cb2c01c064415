"""nn.Module programs at run time: each side's own model, kept from call to call.

A module program (``ir.Program.params``) renders as ``class Model(torch.nn.Module)``.
Eager and compiled each get their own instance, built alike (the same seeds), and
each keeps its parameters and buffers from call to call, as a user's model does:
a buffer's running statistics, a training step's updated weights. ``ModuleSide`` is
one such side; ``script_runtime`` runs it like a program's function (it looks for
``call_tree``, ``begin_call``, ``replay`` and ``in_float64``), and its record's tree
gains the gradients (inputs that require grad, then trainable parameters) and the
module's state after the call (parameters, then buffers), so a lost buffer update
or a wrong parameter gradient differs like any output.

A schedule's ``step`` makes every call one training step: forward, the seeded loss
of ``script_runtime.gradient_loss``, backward, an optimizer step, ``zero_grad``.
The model is compiled; backward runs its compiled backward, the optimizer runs
eagerly on both sides (the same code, so only the gradients and the forward can
differ).

Judging a call needs the state the model had before it: the fp64 reference and a
fresh compile (``fresh_recheck``) start from it. Each side keeps those states
(``begin_call``) and makes new sides from them (``replay``).

Pasted into repro scripts beside ``script_runtime`` (``corpus.scripts``), so it
imports only the standard library, torch and the runtime's own names.
"""

import copy

import torch

from symfuzz.fuzz.script_runtime import gradient_loss, input_gradients, requiring_grad_args, snapshot

# Adam's eps: large enough that a gradient near 0, whose sign rounding may flip,
# moves a weight by a negligible step rather than by a whole learning rate.
ADAM_EPS = 1e-3


def make_optimizer(model, step):
    """The optimizer of a training step (``case.check_step``'s spec) over ``model``'s
    trainable parameters; None when it has none."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        return None
    if step["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=step["lr"], momentum=step["momentum"])
    return torch.optim.Adam(params, lr=step["lr"], eps=ADAM_EPS)


class ModuleSide:
    """One side of a module program's calls: its own ``model_class()``, compiled by
    ``compile_model(model)`` when that is given, whose state persists from call to call.

    ``step`` (a schedule's training step, or None) makes each call a training step.
    ``state`` (from ``state()``) starts the model elsewhere than at its init, and
    ``dtype`` casts its floating state (the fp64 reference).
    """

    def __init__(self, model_class, compile_model=None, step=None, device="cpu", state=None, dtype=None):
        self.model_class, self.step, self.device = model_class, step, device
        model = model_class()
        if state is not None:
            model.load_state_dict(state["model"])
            model.train(state["training"])
        model = model.to(device)
        if dtype is not None:
            model = model.to(dtype)
        self.model = model
        self.optimizer = make_optimizer(model, step) if step is not None else None
        if state is not None and self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        self.saved = state
        self.run = compile_model(model) if compile_model is not None else model
        self.history = {}  # call index -> state() before that call
        self.phase = "forward"  # "backward" while gradients are computed (errors say so)

    @property
    def __code__(self):
        """The code Dynamo compiles and keeps cache entries on: the model's ``forward``."""
        return type(self.model).forward.__code__

    def __call__(self, *args):
        return self.run(*args)

    def frame_locals(self, args) -> dict:
        """The locals of the frame Dynamo guards (``forward``) for a call with ``args``."""
        code = self.__code__
        return dict(zip(code.co_varnames[:code.co_argcount], (self.model, *args)))

    def state(self) -> dict:
        """Everything a call starts from: parameters and buffers, optimizer state, mode."""
        return {"model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
                "optimizer": copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None,
                "training": self.model.training}

    def begin_call(self, index, call):
        """Before call ``index``: set its mode (train or eval), keep the state it starts from."""
        training = call.get("training")
        if training is not None:
            self.model.train(bool(training))
        self.history[index] = self.state()

    def sync_from(self, other) -> None:
        """Go on from ``other``'s current state (parameters, buffers, optimizer, mode),
        in place: after a call that raised, the two sides' states may differ."""
        state = other.state()
        self.model.load_state_dict(state["model"])
        self.model.train(state["training"])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])

    def replay(self, index, compile_model=None):
        """A new side in the state this one had before call ``index``."""
        return ModuleSide(self.model_class, compile_model, self.step, self.device, self.history[index])

    def in_float64(self):
        """This side's starting state in float64, uncompiled: the reference's model."""
        return ModuleSide(self.model_class, None, self.step, self.device, self.saved or self.state(), torch.float64)

    def call_tree(self, args):
        """One call's tree for ``script_runtime.run_call``: (outputs, final inputs,
        gradients, state after the call). The gradients are of ``gradient_loss`` with
        respect to the inputs that require grad, then the trainable parameters (before
        a training step's update); the state is every parameter, then every buffer."""
        self.phase = "forward"
        wanted = requiring_grad_args(args)  # before the call (see there)
        out = self.run(*args)
        tree = (snapshot(out), snapshot(tuple(args)))
        wanted += [p for p in self.model.parameters() if p.requires_grad]
        self.phase = "backward"
        if self.step is not None:
            grads = self._train_step(out, wanted)
        else:
            grads = input_gradients(out, wanted) if wanted else ()
        self.phase = "forward"
        return tree + (grads, tuple(snapshot(t) for t in self.model.state_dict().values()))

    def _train_step(self, out, wanted):
        loss = gradient_loss(out)
        if loss is not None:
            loss.backward()
        for t in wanted:
            # Where the loss does not reach, autograd leaves None and a compiled backward may hand
            # zeros back (as ``input_gradients`` says): zeros on both sides, so both step alike.
            if t.grad is None:
                t.grad = torch.zeros_like(t)
        grads = tuple(t.grad.detach().clone() for t in wanted)
        if self.optimizer is not None:
            self.optimizer.step()
            self.optimizer.zero_grad()
        return grads


def module_sides(model_class, compile_model, step=None, device="cpu"):
    """(eager, compiled) sides of a module program: two models built alike, the second
    compiled by ``compile_model(model)``."""
    return ModuleSide(model_class, None, step, device), ModuleSide(model_class, compile_model, step, device)
