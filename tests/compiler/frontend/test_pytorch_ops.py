"""``relay.frontend.from_pytorch`` operator by operator: each small module is traced and
scripted (scripted code adds import-time ``if``s, loops and Python-number math), converted,
run on the reference interpreter and compared with torch.

Returns: one case per operator family. Traps: modes the frontend does not support name the
node and the mode. Skipped without torch.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from compiler import relay  # noqa: E402
from compiler.frontend import OpNotImplemented  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
    pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning"),
]


class _Fn(nn.Module):
    """A module whose forward is one expression (scriptable: ``mode`` picks it)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def forward(self, x):
        mode = self.mode
        if mode == "rsub_pow":
            return 1 - x**2 / 3
        if mode == "div_floor":
            return torch.div(x * 10, 3, rounding_mode="floor")
        if mode == "div_trunc":
            return torch.div(x * 10 - 5, 3, rounding_mode="trunc")
        if mode == "div_trunc_int":
            y = (x * 10 - 5).to(torch.int64)
            return torch.div(y, 3, rounding_mode="trunc")
        if mode == "max_min_dim":
            return x.max(1)[0] + x.min(1).values + x.argmax(1)
        if mode == "reductions":
            return x.amax((0, 1)) + x.sum() + x.mean() + x.sum(0, keepdim=True)
        if mode == "stack_unbind":
            return torch.stack(x.unbind(1), 0)
        if mode == "chunk_uneven":
            a, b, c = x.chunk(3, 1)
            return torch.cat([c, b, a], 1)
        if mode == "masked_where":
            return torch.where(x > 0.5, x, 0.0) + x.masked_fill(x < 0.2, -1.0)
        if mode == "expand_slice":
            return x[:, :1].expand(-1, 4) * 2 + x[..., -4:] + x[1:, ::2].sum()
        if mode == "bmm":
            return torch.bmm(x, x.transpose(1, 2))
        if mode == "matmul_vector":
            return x @ x[0]
        if mode == "addmm":
            return torch.addmm(x[:, 0], x, x.t(), beta=0.5, alpha=2.0)
        if mode == "squeeze":
            return x.squeeze() + x.squeeze(1).sum(0)
        if mode == "math":
            return torch.sqrt(x).exp().log() + torch.rsqrt(x + 1)
        if mode == "to_int":
            return (x * 10).to(torch.int64) + 1
        if mode == "clamp_min":
            return x.clamp(min=0.3)
        if mode == "size_view":
            return x.view(x.size(0), -1).reshape(-1, 2)
        if mode == "zeros_ones":
            return x + torch.zeros(x.shape[1]) + torch.ones(1, x.shape[1])
        if mode == "conv_transpose":
            weight = torch.ones(3, 2, 3, 3) * 0.5
            return F.conv_transpose2d(x, weight, stride=2, padding=1, output_padding=1)
        if mode == "promotion":
            ints = (x * 10).to(torch.int32)
            scalar = torch.tensor(2.5)
            return scalar * ints + (ints + torch.tensor(3, dtype=torch.int64)).to(x)
        if mode == "gather_scatter":
            idx = torch.tensor([[0, 2, 1, 0], [2, 2, 0, 1]])
            gathered = torch.gather(x, 0, idx)
            added = torch.zeros(3, 4).scatter_add(0, idx, x[:2])
            largest = x.scatter_reduce(0, idx, x * 2, reduce="amax")
            filled = x.scatter(1, idx[:, :2], 5.0)
            return torch.cat([gathered, added, largest, filled])
        if mode == "arange":
            return x + torch.arange(x.shape[1]) + torch.arange(1, 9, 2, dtype=torch.float32)
        return x


_FN_SHAPES = {
    "rsub_pow": (3, 4),
    "gather_scatter": (3, 4),
    "div_floor": (3, 4),
    "div_trunc": (3, 4),
    "div_trunc_int": (3, 4),
    "max_min_dim": (3, 4),
    "reductions": (3, 4),
    "stack_unbind": (3, 4),
    "chunk_uneven": (2, 7),
    "masked_where": (3, 4),
    "expand_slice": (3, 4),
    "bmm": (2, 3, 4),
    "matmul_vector": (4, 4),
    "addmm": (3, 3),
    "squeeze": (3, 1, 4),
    "math": (3, 4),
    "to_int": (3, 4),
    "clamp_min": (3, 4),
    "size_view": (2, 3, 4),
    "zeros_ones": (3, 4),
    "arange": (3, 4),
    "conv_transpose": (1, 3, 4, 4),
    "promotion": (3, 4),
}

_MODULES = {
    "conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=1, stride=2), (1, 3, 9)),
    "conv_groups_dilation": (
        lambda: nn.Conv2d(4, 8, 3, padding=2, dilation=2, groups=2),
        (1, 4, 9, 9),
    ),
    "conv_padding_same": (lambda: nn.Conv2d(3, 4, 4, padding="same"), (1, 3, 8, 8)),
    "batch_norm_1d": (lambda: nn.BatchNorm1d(6), (4, 6)),
    "max_pool_ceil": (lambda: nn.MaxPool2d(3, 2, ceil_mode=True), (1, 2, 8, 8)),
    "avg_pool_exclude_pad": (lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), (1, 2, 7, 7)),
    "adaptive_avg_3x3": (lambda: nn.AdaptiveAvgPool2d((3, 3)), (1, 2, 9, 9)),
    "adaptive_max_1x1": (lambda: nn.AdaptiveMaxPool2d(1), (1, 2, 5, 5)),
    "group_norm": (lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    "layer_norm_2d": (lambda: nn.LayerNorm([3, 4]), (2, 3, 4)),
    "hardtanh": (lambda: nn.Hardtanh(-0.5, 0.5), (3, 4)),
    "relu6": (lambda: nn.ReLU6(), (3, 4)),
    "leaky_relu": (lambda: nn.LeakyReLU(0.2), (3, 4)),
    "tanh_sigmoid": (lambda: nn.Sequential(nn.Tanh(), nn.Sigmoid()), (3, 4)),
    "mish": (lambda: nn.Mish(), (3, 4)),
    "elu": (lambda: nn.ELU(0.5), (3, 4)),
    "prelu_channels": (lambda: nn.PReLU(3, 0.1), (2, 3, 4)),
    "softplus_beta": (lambda: nn.Softplus(beta=2.0), (3, 4)),
    "pixel_shuffle": (lambda: nn.PixelShuffle(2), (1, 4, 3, 3)),
    "flatten_middle": (lambda: nn.Flatten(1, 2), (2, 3, 4, 5)),
    "unflatten": (lambda: nn.Unflatten(1, (2, 3)), (2, 6)),
    "softmax_dim_minus_2": (lambda: nn.Softmax(-2), (2, 3, 4)),
    "gelu_tanh": (lambda: nn.GELU("tanh"), (3, 4)),
    "upsample_nearest_size": (lambda: nn.Upsample(size=(6, 9), mode="nearest"), (1, 2, 3, 3)),
    "upsample_bilinear_half_pixel": (
        lambda: nn.Upsample(scale_factor=2, mode="bilinear"),
        (1, 2, 3, 3),
    ),
    "upsample_bilinear_size": (lambda: nn.Upsample(size=(7, 2), mode="bilinear"), (1, 2, 3, 5)),
    "upsample_bicubic": (lambda: nn.Upsample(scale_factor=2, mode="bicubic"), (1, 2, 4, 3)),
    "upsample_bicubic_corners": (
        lambda: nn.Upsample(size=(5, 7), mode="bicubic", align_corners=True),
        (1, 2, 4, 3),
    ),
    "multihead_attention": (None, (2, 3, 8)),
}


class _SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x)[0]


def _check(module: nn.Module, shape: tuple[int, ...], script: bool) -> None:
    torch.manual_seed(0)
    module = module.eval()
    x = torch.rand(*shape)
    with torch.no_grad():
        expected = module(x).numpy()
    jit = torch.jit.script(module) if script else torch.jit.trace(module, (x,), check_trace=False)
    mod, params = relay.frontend.from_pytorch(jit, [("x", shape)])
    got = relay.create_executor("debug", mod, params=params).evaluate()(x=x.numpy())
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


_SCRIPT = pytest.mark.parametrize("script", [False, True], ids=["traced", "scripted"])


@_SCRIPT
@pytest.mark.parametrize("mode", sorted(_FN_SHAPES))
def test_expression_matches_torch(mode, script):
    _check(_Fn(mode), _FN_SHAPES[mode], script)


@_SCRIPT
@pytest.mark.parametrize("name", sorted(_MODULES))
def test_module_matches_torch(name, script):
    torch.manual_seed(0)
    make, shape = _MODULES[name]
    _check(_SelfAttention() if make is None else make(), shape, script)


def test_embedding_takes_integer_indices():
    torch.manual_seed(0)
    embed = nn.Embedding(10, 4).eval()
    ids = torch.tensor([[0, 9, 3], [3, 3, 1]])
    mod, params = relay.frontend.from_pytorch(
        torch.jit.trace(embed, (ids,)), [("ids", ((2, 3), "int64"))]
    )
    got = relay.create_executor("debug", mod, params=params).evaluate()(ids=ids.numpy())
    np.testing.assert_array_equal(np.asarray(got), embed(ids).detach().numpy())


# --- traps -------------------------------------------------------------------------------------


def test_scale_factors_that_do_not_divide_out_are_refused_by_name():
    # 3 * 1.5 is 4.5 rows: PyTorch samples at 1.5, image.resize2d would at 4 / 3.
    up = nn.Upsample(scale_factor=1.5, mode="bilinear").eval()
    traced = torch.jit.trace(up, (torch.rand(1, 2, 3, 3),))
    with pytest.raises(OpNotImplemented, match=r"aten::upsample_bilinear2d.*give the size"):
        relay.frontend.from_pytorch(traced, [("x", (1, 2, 3, 3))])
