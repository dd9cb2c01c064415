"""The runtime every standalone script carries, shared with the campaign and opcheck.

Its parts, by job, are the modules of ``fuzz/runtime/``: ``inputs`` (the one
``make_input``, a call's arguments, marks, compile config), ``comparing`` (the
tolerance table and the one judging function, ``compare``), ``running`` (one
call, its gradients, exceptions), ``rounding`` (the explainer of discrete flips
and the fp64 reference), ``signatures`` and ``schedules``. This module gathers
them under one name: code in symfuzz imports from here, and ``corpus.scripts``
pastes from here (all of it, or the pieces a script needs, with what they use),
so a script judges a run exactly the way the campaign did.

They import only the standard library, torch and each other. Keep it that way.
"""

# The parts, lowest first; the names they define, all of them (scripts and tests reach some private ones).
from symfuzz.fuzz.runtime.inputs import (  # noqa: F401
    DTYPES, _LAYOUT_DEFAULTS, normal_layout, base_shape, apply_layout, make_input, value_class, make_arg,
    make_args, apply_marks, make_compiled_args, _config_modules, set_compile_config,
)
from symfuzz.fuzz.runtime.comparing import (  # noqa: F401
    TOLERANCES, REF_ERROR_FACTOR, flatten, compare, _type_name, dtype_family, metadata_kind, value_kind,
    _both_parts, tensors_close, within_reference, mismatch_detail, to_reference_args, _as_float64,
    Float64Everywhere, REJECTION_TYPES, rejection, judge_call, name_gradient,
)
from symfuzz.fuzz.runtime.running import (  # noqa: F401
    snapshot, run_call, requiring_grad_args, COTANGENT_SEED, gradient_loss, input_gradients, describe_exception,
    exception_stage, float64_call,
)
from symfuzz.fuzz.runtime.rounding import (  # noqa: F401
    reference_call, _PRECISION, _EXACT, _STRUCTURAL, _POINTWISE, _REDUCTIONS, _SCANS, _SELECTIONS, _COUNTS,
    _INDEX_OUTPUTS, _COMPARISONS, _ROUNDINGS, _KEEP_STEP, _TO_PYTHON, _ADD_STEPS, _MUL_STEPS, _Unfollowable,
    _op_name, _tensors, _reduce, _reduce_any, _dim_args, _Entry, RoundingShadow, explain_rounding, attach_rounding,
    rounding_explains, _rounding_reason,
)
from symfuzz.fuzz.runtime.signatures import (  # noqa: F401
    _VOLATILE, normalize_message, signature, gradient_of, failure_key,
)
from symfuzz.fuzz.runtime.schedules import (  # noqa: F401
    frame_count, cache_entries, graph_count, run_schedule, recompile_reason, fresh_recheck, REUSE_SYMPTOMS, reused,
    judge_schedule_call, reference_output,
)
