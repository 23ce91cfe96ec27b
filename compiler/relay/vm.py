"""``relay.vm``: compile a Relay module to a VM executable, like TVM's ``tvm.relay.vm``.

Compiler layer (``compiler.relay``).

``relay.vm.compile(mod, target=None, target_host=None, params=None)`` (TVM's signature)
optimizes and lowers the module under
the current :class:`~compiler.transform.PassContext` (``opt_level`` 2 unless a ``with
relay.transform.PassContext(...)`` block says otherwise), then generates bytecode:

1. bind ``params`` to ``@main``'s parameters of those names, as constants;
2. optimize, each pass run when the context enables it: ``Legalize`` (opt_level 1: the
   legalizations a program registered with ``relay.op.register_legalize``), ``SimplifyInference``
   (batch_norm, dropout and group_norm become arithmetic; layer_norm stays one
   kernel), ``SpecializeConstantArguments``
   (opt_level 2: a recursive loop whose callers all pass it the same bound weights, which
   it passes on unchanged, gets a copy with those weights as constants, so the passes
   below see them), ``FoldConstant`` (opt_level 2:
   with params bound, the weights' arithmetic is computed now, e.g. batch_norm becomes
   one scale and one shift vector), ``FoldExplicitPadding`` (opt_level 1: a zero ``nn.pad``
   of a convolution's spatial axes becomes its padding), ``FoldScaleAxis`` (opt_level 2
   here, 3 in TVM: a constant per-channel scale after a convolution goes into its
   weight, a constant per-channel add becomes a ``bias_add``), ``EliminateCommonSubexpr``
   (opt_level 2),
   ``CombineSummedDense`` (opt_level 2: ``dense(x, W) + dense(h, U)`` with constant
   weights becomes one product of the joined data and weights),
   ``CombineParallelDense`` (opt_level 2: dense layers with constant weights reading one
   input, with their bias adds, become one dense layer and slices of its output),
   ``AlterOpLayout`` (opt_level 2: 3x3 convolutions with constant weights become Winograd
   convolutions, dense layers with constant weights take them packed in panels or
   transposed),
   ``FoldConstant`` again (the weight transforms), ``ScalePackedWeight`` (opt_level 2: a
   per-channel scale of a packed convolution's input, such as a squeeze-excite gate,
   multiplies the weight instead where that is smaller), ``SimplifyPower`` (opt_level 1:
   ``power`` by a whole constant up to 4 becomes multiplications), ``SimplifyExpr``
   (opt_level 1: transposes of transposes become one, identity transposes and
   concatenations of one non-empty tensor go away, average pools over whole planes become
   means), ``SinkReshape`` (opt_level 1: a
   reshape moves below the elementwise operators that read it, so that they join the
   kernel of the product before it), ``TransposeIntoBatchMatmul`` (opt_level 1: a batch
   product's transposed second operand, an attention layer's keys, is made the other way
   round and read with ``transpose_b``) and ``SplitToSlices``
   (opt_level 1: projections of ``split`` become slices that fuse into their consumers);
3. remove dead ``let`` bindings (``DeadCodeElimination``, always, unless disabled by
   name: the calls SimplifyInference replaced must not reach the code generator);
4. eta-expand constructors used as values, infer types, write down the axes of each
   ``squeeze`` without ``axis`` (:mod:`compiler.transform.squeeze_axes`);
5. ``FuseOps``: group operator calls into primitive functions, one kernel each (fused at
   opt_level 1 and above; at opt_level 0 every operator is its own kernel);
6. wrap any operator call still outside a primitive (when ``FuseOps`` is disabled);
7. convert to A-normal form, infer types;
8. lambda-lift local functions into globals with closure conversion (types preserved);
9. generate bytecode (:func:`compiler.backend.codegen.compile_module`).

Every step is a pass object, so ``PassContext(instruments=[PassTimingInstrument()])``
times each one. :func:`optimize` returns the module after step 8, for inspection and
tests. The same module always compiles to the same executable (and the same bytes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import vm
from compiler.backend.codegen import compile_module
from compiler.ir.bind import bind_params_by_name
from compiler.ir.expr import Function
from compiler.ir.module import IRModule
from compiler.relay.target import as_target
from compiler.transform import (
    AlterOpLayout,
    CombineParallelDense,
    CombineSummedDense,
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    FoldExplicitPadding,
    FoldScaleAxis,
    InferType,
    Legalize,
    ModulePass,
    PassContext,
    ScalePackedWeight,
    Sequential,
    SimplifyExpr,
    SimplifyInference,
    SimplifyPower,
    SinkReshape,
    SpecializeConstantArguments,
    SplitToSlices,
    TransposeIntoBatchMatmul,
)
from compiler.transform.combine_parallel import MIN_BRANCHES
from compiler.transform.eta_expand import EtaExpand
from compiler.transform.fuse_ops import FuseOps
from compiler.transform.lambda_lift import lambda_lift
from compiler.transform.pass_manager import PassInfo
from compiler.transform.primitives import wrap_primitives
from compiler.transform.squeeze_axes import explicit_squeeze_axes
from compiler.transform.to_anf import ToANormalForm


def _check_target(target: object, target_host: object = None) -> None:
    """Raise unless ``target`` and ``target_host`` name this CPU (see compiler.relay.target)."""

    as_target(target, target_host)


def _as_module(mod: object) -> IRModule:
    if isinstance(mod, IRModule):
        return mod
    if isinstance(mod, Function):
        return IRModule.from_expr(mod)
    raise TypeError(f"relay.vm.compile expects an IRModule, got {type(mod).__name__}")


def _bind_params(mod: IRModule, params: Mapping[str, Any] | None) -> IRModule:
    if not params:
        return mod

    if "main" not in mod:
        raise ValueError("params were given but the module has no @main to bind them to")
    bound = mod.copy()
    bound["main"] = bind_params_by_name(mod["main"], dict(params))
    return bound


def _lowering_pass(name: str, func: Callable[[IRModule], IRModule]) -> Any:
    """A named pass for a lowering step (so pass instruments see it)."""

    return ModulePass(lambda mod, ctx: func(mod), opt_level=0, name=name)


#: The PassContext opt_level from which ``relay.vm.compile`` runs the rewrites TVM keeps for
#: opt_level 3 or 4 (common subexpressions, summed and parallel dense layers, weight
#: layouts). They pay off on every CPU this VM targets, and users who keep the default
#: context (opt_level 2) should get the packed and Winograd kernels too; below 2 nothing
#: is folded, so a joined or packed weight would be recomputed on every call.
DEFAULT_REWRITE_LEVEL = 2


def _at_level(pass_: Any, opt_level: int) -> Any:
    """``pass_`` (a fresh object) enabled in this pipeline from ``opt_level`` on; the pass
    classes keep TVM's level for users who put them in their own ``Sequential``."""

    pass_.info = PassInfo(opt_level, pass_.info.name, pass_.info.required)
    return pass_


def _optimizations() -> Any:
    """The optimizing passes, filtered by the current PassContext like any Sequential."""

    # The second FoldConstant computes the weight transforms AlterOpLayout introduced.
    return Sequential(
        [
            # First, as in TVM's pass prefix: a program's legalizations see its own calls.
            Legalize(),
            # One layer-norm kernel reads each row twice; its arithmetic form took four
            # kernels and four times as long (BERT's 128x768 rows on an AMD EPYC).
            SimplifyInference(keep=("nn.layer_norm",)),
            SpecializeConstantArguments(),
            FoldConstant(),
            FoldExplicitPadding(),
            _at_level(FoldScaleAxis(), DEFAULT_REWRITE_LEVEL),
            _at_level(EliminateCommonSubexpr(), DEFAULT_REWRITE_LEVEL),
            _at_level(CombineSummedDense(), DEFAULT_REWRITE_LEVEL),
            _at_level(CombineParallelDense(MIN_BRANCHES), DEFAULT_REWRITE_LEVEL),
            _at_level(AlterOpLayout(), DEFAULT_REWRITE_LEVEL),
            FoldConstant(),
            ScalePackedWeight(),
            SimplifyPower(),
            SimplifyExpr(),
            SinkReshape(),
            TransposeIntoBatchMatmul(),
            SplitToSlices(),
        ],
        name="VMOptimize",
    )


def _lowering() -> list[Any]:
    """The steps from an optimized module to the code generator's input, in order."""

    return [
        EtaExpand(expand_constructor=True),
        InferType(),
        _lowering_pass("ExplicitSqueezeAxes", explicit_squeeze_axes),
        # FuseOps goes through a Sequential so that disabled_pass=["FuseOps"] is honoured.
        Sequential([FuseOps()], name="VMFuse"),
        _lowering_pass("WrapPrimitives", wrap_primitives),
        ToANormalForm(),
        InferType(),
        # Lambda lifting keeps every type it was given, so no further inference is needed.
        _lowering_pass("LambdaLift", lambda_lift),
    ]


def optimize(
    mod: IRModule | Function,
    target: Any = None,
    target_host: Any = None,
    params: Mapping[str, Any] | None = None,
) -> tuple[IRModule, dict[str, Any]]:
    """Lower ``mod`` to the form the code generator takes (TVM's ``VMCompiler.optimize``):
    steps 1 to 8 of the module docstring, under the current ``PassContext``.

    Parameters
    ----------
    mod : IRModule or Function
        The program (a function becomes the ``main`` of a new module); not modified.
    target, target_host : str, dict, Target or None
        Any CPU target (see :mod:`compiler.relay.target`); None means this CPU.
    params : dict of str to array, optional
        Values for ``@main``'s parameters of those names, bound as constants.

    Returns
    -------
    (IRModule, dict)
        The lowered, type-checked module and the parameters that were bound.
    """

    _check_target(target, target_host)
    lowered = _bind_params(_as_module(mod), params)
    lowered = _optimizations()(lowered)
    dead_code = DeadCodeElimination()
    # Run at every opt_level (the calls SimplifyInference replaced are dead and have no
    # kernels), unless the user disabled it by name.
    if dead_code.name not in PassContext.current().disabled_pass:
        lowered = dead_code(lowered)
    for step in _lowering():
        lowered = step(lowered)
    return lowered, dict(params or {})


def compile(
    mod: IRModule | Function,
    target: Any = None,
    target_host: Any = None,
    params: Mapping[str, Any] | None = None,
) -> Any:
    """Compile a Relay module to a VM executable.

    The module is optimized under ``relay.transform.PassContext.current()`` (see the
    module docstring): at the default ``opt_level`` 2 (as at 3) bound weights are folded,
    weights packed for the product and Winograd kernels and operators fused into kernels;
    ``opt_level=0`` gives one kernel per operator.

    Parameters
    ----------
    mod : IRModule or Function
        The program; every global function is compiled, used or not.
    target, target_host : str, dict, Target or None
        This CPU, however TVM names it: ``"llvm"`` (options such as ``-mcpu`` and
        ``-mattr`` are accepted and recorded), ``"c"``, ``"cpu"``, a
        ``tvm.target.Target``, or None. A GPU target raises ``ValueError``.
    params : dict of str to array, optional
        Values bound to ``@main``'s parameters of the same names as constants before
        optimizing; those parameters disappear from ``main``'s signature.

    Returns
    -------
    vm.Executable
        Run it with ``vm.VirtualMachine(exe).invoke("main", *args)``; the same module always
        gives the same executable (and the same saved bytes).

    Raises
    ------
    ValueError
        For an unknown or GPU target (naming it).
    TypeError
        If the program is ill-typed (the message names the expression and the types).
    compiler.backend.codegen.CodegenError
        If the program uses something the VM cannot run yet.
    """

    lowered, _ = optimize(mod, target, target_host, params)
    return compile_module(lowered)


def __getattr__(name: str) -> Any:
    # TVM's relay.vm also names the runtime classes; they are vm's own, loaded on use.
    if name in ("Executable", "VirtualMachine"):
        return getattr(vm, name)
    raise AttributeError(f"module 'relay.vm' has no attribute {name!r}")


class VMCompiler:
    """TVM's two-step compiler object: ``set_params``, ``lower``, ``get_exec``.

    Each instance compiles one module.
    """

    def __init__(self) -> None:
        self._params: dict[str, Any] = {}
        self._exec: Any = None

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Values to bind to ``@main``'s parameters of those names."""
        self._params = dict(params)

    def get_params(self) -> dict[str, Any]:
        """The parameters set with :meth:`set_params`."""
        return dict(self._params)

    def optimize(
        self,
        mod: IRModule | Function,
        target: Any = None,
        target_host: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> tuple[IRModule, dict[str, Any]]:
        """See :func:`optimize`; ``params`` defaults to those set with :meth:`set_params`."""
        return optimize(mod, target, target_host, self._params if params is None else params)

    def lower(self, mod: IRModule | Function, target: Any = None, target_host: Any = None) -> None:
        """Compile ``mod``; fetch the result with :meth:`get_exec`."""
        if self._exec is not None:
            raise RuntimeError("a VMCompiler compiles one module; make a new one for another")
        self._exec = compile(mod, target, target_host, self._params)

    def codegen(self) -> None:
        """Kept for TVM compatibility: :meth:`lower` already generated the code."""
        if self._exec is None:
            raise RuntimeError("call lower(mod) before codegen()")

    def get_exec(self) -> Any:
        """The executable made by :meth:`lower`."""
        if self._exec is None:
            raise RuntimeError("call lower(mod) before get_exec()")
        return self._exec
