"""The ``relay.transform`` namespace: module-to-module passes and the pass manager.

Compiler layer (``compiler.transform``). Each pass is an object with a ``name`` (and an
``info`` with its opt level) that is called on an IRModule and returns a new IRModule;
:class:`Sequential` and :class:`PassContext` combine and configure them as in TVM::

    seq = relay.transform.Sequential([relay.transform.SimplifyInference(),
                                      relay.transform.FoldConstant()])
    with relay.transform.PassContext(opt_level=3):
        mod = seq(mod)
"""

from compiler.transform.alter_op_layout import AlterOpLayout
from compiler.transform.combine_parallel_dense import CombineParallelDense
from compiler.transform.combine_summed_dense import CombineSummedDense
from compiler.transform.dead_code import DeadCodeElimination, RemoveUnusedFunctions
from compiler.transform.eliminate_common_subexpr import EliminateCommonSubexpr
from compiler.transform.fold_constant import FoldConstant
from compiler.transform.infer_type import InferType
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
from compiler.transform.simplify_inference import SimplifyInference
from compiler.transform.specialize_arguments import SpecializeConstantArguments
from compiler.transform.split_to_slices import SplitToSlices

for _pass in (
    AlterOpLayout,
    CombineParallelDense,
    CombineSummedDense,
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    InferType,
    RemoveUnusedFunctions,
    SimplifyInference,
    SpecializeConstantArguments,
    SplitToSlices,
):
    register_pass(_pass.__name__, _pass)
del _pass


def __getattr__(name: str) -> object:
    # FuseOps lives with the lowering passes (compiler.passes.fuse_ops), which import this
    # package's pass manager; importing it lazily keeps the two packages free of a cycle.
    if name == "FuseOps":
        from compiler.passes.fuse_ops import FuseOps

        return FuseOps
    raise AttributeError(f"module 'relay.transform' has no attribute {name!r}")


register_pass("FuseOps", lambda: __getattr__("FuseOps")())  # type: ignore[operator]

__all__ = [
    "AlterOpLayout",
    "CombineParallelDense",
    "CombineSummedDense",
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "FoldConstant",
    "FunctionPass",
    "FuseOps",
    "InferType",
    "ModulePass",
    "Pass",
    "PassContext",
    "PassInfo",
    "PassInstrument",
    "PassTimingInstrument",
    "RemoveUnusedFunctions",
    "Sequential",
    "SimplifyInference",
    "SpecializeConstantArguments",
    "SplitToSlices",
    "function_pass",
    "get_pass",
    "module_pass",
    "pass_instrument",
    "register_pass",
]
