"""The ``relay.transform`` namespace: module-to-module passes and the pass manager.

Compiler layer (``compiler.transform``). Each pass is an object with a ``name`` (and an
``info`` with its opt level) that is called on an IRModule and returns a new IRModule;
:class:`Sequential` and :class:`PassContext` combine and configure them as in TVM::

    seq = relay.transform.Sequential([relay.transform.SimplifyInference(),
                                      relay.transform.FoldConstant()])
    with relay.transform.PassContext(opt_level=3):
        mod = seq(mod)

The same package holds the lowering passes the VM compiler (:mod:`compiler.relay.vm`) runs
after them, with type inference in between: pure ``IRModule -> IRModule`` functions, one
per module, none mutating its input:

- :func:`~compiler.transform.eta_expand.eta_expand`: constructors used as values become
  global functions;
- :func:`~compiler.transform.fuse_ops.fuse_ops`: operator calls are grouped into primitive
  functions, one kernel each, by TVM's fusion rules (:mod:`compiler.transform.fuse_graph`
  finds the groups); :class:`FuseOps` is the same as a pass object;
- :func:`~compiler.transform.primitives.wrap_primitives`: each operator call still outside
  a primitive gets its own;
- :func:`~compiler.transform.to_anf.to_anf`: A-normal form, every non-atomic
  sub-expression bound by a ``let``;
- :func:`~compiler.transform.lambda_lift.lambda_lift`: local functions become globals,
  closures capture free variables.

TVM's form-changing passes are pass objects too: :class:`ToANormalForm`,
:class:`ToGraphNormalForm` (:mod:`compiler.transform.to_gnf`), :class:`LambdaLift`,
:class:`EtaExpand`, :class:`DefuseOps` (:mod:`compiler.transform.defuse_ops`), and
:class:`DynamicToStatic` (:mod:`compiler.transform.dynamic_to_static`), which makes the shapes
the types know constant and ``dyn.*`` operators static. :class:`PrintIR` prints the module
between two passes, and :func:`InferTypeLocal` gives one expression's type. Among TVM's
optimizations that the VM compiler does not run by itself: :class:`CanonicalizeOps`
(:mod:`compiler.transform.canonicalize_ops`), :class:`CombineParallelConv2D` and
:class:`CombineParallelBatchMatmul` (:mod:`compiler.transform.combine_parallel`), and
:class:`Legalize` (:mod:`compiler.transform.legalize`), which applies the legalizations a
program registers with ``relay.op.register_legalize``, and :class:`Inline`
(:mod:`compiler.transform.inline`), which inlines the global functions marked ``Inline=1``,
and :class:`ConvertLayout` (:mod:`compiler.transform.convert_layout`), which cancels the
transposes between channels-last convolutions and pools.

:mod:`compiler.transform.typed_rewrite` holds what these rewrites share (carrying checked
types over to rebuilt nodes, recognizing primitives and closures).
"""

from compiler.transform.alter_op_layout import AlterOpLayout
from compiler.transform.canonicalize_ops import CanonicalizeOps
from compiler.transform.combine_parallel import (
    CombineParallelBatchMatmul,
    CombineParallelConv2D,
    CombineParallelDense,
)
from compiler.transform.combine_summed_dense import CombineSummedDense
from compiler.transform.convert_layout import ConvertLayout
from compiler.transform.dead_code import DeadCodeElimination, RemoveUnusedFunctions
from compiler.transform.defuse_ops import DefuseOps
from compiler.transform.dynamic_to_static import DynamicToStatic
from compiler.transform.eliminate_common_subexpr import EliminateCommonSubexpr
from compiler.transform.eta_expand import EtaExpand
from compiler.transform.fold_constant import FoldConstant
from compiler.transform.fold_explicit_padding import FoldExplicitPadding
from compiler.transform.fold_scale_axis import FoldScaleAxis
from compiler.transform.fuse_ops import FuseOps
from compiler.transform.infer_type import InferType, InferTypeLocal
from compiler.transform.inline import Inline
from compiler.transform.lambda_lift import LambdaLift
from compiler.transform.legalize import Legalize
from compiler.transform.pass_manager import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassInfo,
    PassInstrument,
    PassTimingInstrument,
    Sequential,
    function_pass,
    get_pass,
    module_pass,
    pass_instrument,
    register_pass,
)
from compiler.transform.print_ir import PrintIR
from compiler.transform.scale_packed_weight import ScalePackedWeight
from compiler.transform.simplify_expr import SimplifyExpr
from compiler.transform.simplify_inference import SimplifyInference
from compiler.transform.simplify_power import SimplifyPower
from compiler.transform.sink_reshape import SinkReshape
from compiler.transform.specialize_arguments import SpecializeConstantArguments
from compiler.transform.split_to_slices import SplitToSlices
from compiler.transform.to_anf import ToANormalForm
from compiler.transform.to_gnf import ToGraphNormalForm
from compiler.transform.transpose_into_matmul import TransposeIntoBatchMatmul

for _pass in (
    AlterOpLayout,
    CanonicalizeOps,
    CombineParallelBatchMatmul,
    CombineParallelConv2D,
    CombineParallelDense,
    CombineSummedDense,
    DeadCodeElimination,
    DefuseOps,
    DynamicToStatic,
    EliminateCommonSubexpr,
    EtaExpand,
    FoldConstant,
    FoldExplicitPadding,
    FoldScaleAxis,
    FuseOps,
    InferType,
    Inline,
    LambdaLift,
    Legalize,
    PrintIR,
    RemoveUnusedFunctions,
    ScalePackedWeight,
    SimplifyExpr,
    SimplifyInference,
    SpecializeConstantArguments,
    SimplifyPower,
    SinkReshape,
    SplitToSlices,
    ToANormalForm,
    ToGraphNormalForm,
    TransposeIntoBatchMatmul,
):
    register_pass(_pass.__name__, _pass)
del _pass


__all__ = [
    "AlterOpLayout",
    "CanonicalizeOps",
    "CombineParallelBatchMatmul",
    "CombineParallelConv2D",
    "CombineParallelDense",
    "CombineSummedDense",
    "ConvertLayout",
    "DeadCodeElimination",
    "DefuseOps",
    "DynamicToStatic",
    "EliminateCommonSubexpr",
    "EtaExpand",
    "FoldConstant",
    "FoldExplicitPadding",
    "FoldScaleAxis",
    "FunctionPass",
    "FuseOps",
    "InferType",
    "InferTypeLocal",
    "Inline",
    "LambdaLift",
    "Legalize",
    "ModulePass",
    "Pass",
    "PassContext",
    "PassInfo",
    "PassInstrument",
    "PassTimingInstrument",
    "PrintIR",
    "RemoveUnusedFunctions",
    "ScalePackedWeight",
    "Sequential",
    "SimplifyExpr",
    "SimplifyInference",
    "SimplifyPower",
    "SinkReshape",
    "SpecializeConstantArguments",
    "SplitToSlices",
    "ToANormalForm",
    "ToGraphNormalForm",
    "TransposeIntoBatchMatmul",
    "function_pass",
    "get_pass",
    "module_pass",
    "pass_instrument",
    "register_pass",
]
