"""``relay.frontend.from_pytorch`` on small models built with ``torch.nn`` (no downloads):
each is traced or scripted, converted, run and compared with torch.

Returns: the seed model (Conv2d + Softmax) on every executor kind, a ResNet-style block, an
MLP, a transformer encoder layer, a segmentation-style head with upsampling, traced and
scripted. Skipped without torch.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compiler import relay  # noqa: E402

# torch 2.13 deprecates TorchScript in favour of torch.export; TVM's from_pytorch (and this
# one) still takes TorchScript.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
]


def _run(module, inputs, *, script=False, kind="debug", input_infos=None):
    """Convert ``module`` (traced at ``inputs`` or scripted) and run it on ``kind``."""
    module = module.eval()
    with torch.no_grad():
        expected = module(*inputs)
    # Traced with autograd on: under no_grad torch.nn.TransformerEncoderLayer takes its fused
    # fast path (aten::_transformer_encoder_layer_fwd) into the trace.
    jit = (
        torch.jit.script(module)
        if script
        else torch.jit.trace(module, tuple(inputs), check_trace=False)
    )
    if input_infos is None:
        input_infos = [(f"input{i}", tuple(x.shape)) for i, x in enumerate(inputs)]
    mod, params = relay.frontend.from_pytorch(jit, input_infos)
    func = relay.create_executor(kind, mod, params=params).evaluate()
    feeds = {name: x.numpy() for (name, _), x in zip(input_infos, inputs)}
    got = func(**feeds)
    return got, expected


def _close(got, expected, tol=1e-5):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _close(g, e, tol)
        return
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    want = expected.numpy()
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# --- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["debug", "vm", "graph", "aot"])
def test_seed_conv_softmax_matches_torch_on_every_executor(kind):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 7, bias=False), torch.nn.Softmax(dim=1))
    got, expected = _run(model, [torch.rand(1, 3, 10, 10)], kind=kind)
    _close(got, expected, 1e-5)


class _BasicBlock(torch.nn.Module):
    """A torchvision-style residual block with a strided, projected shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.down = torch.nn.Sequential(
            torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout)
        )

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.down(x))


def _resnet_like():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 7, 2, 3, bias=False),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(3, 2, 1),
        _BasicBlock(8, 16, 2),
        torch.nn.AdaptiveAvgPool2d((1, 1)),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 10),
    )
    # Non-trivial running statistics, so batch norm is not the identity.
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.5, 0.5)
    return model


@pytest.mark.parametrize("script", [False, True], ids=["traced", "scripted"])
def test_resnet_style_block_matches_torch(script):
    got, expected = _run(_resnet_like(), [torch.rand(2, 3, 32, 32)], script=script)
    _close(got, expected, 1e-4)


@pytest.mark.parametrize("script", [False, True], ids=["traced", "scripted"])
def test_mlp_matches_torch(script):
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16),
        torch.nn.GELU(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(16, 16),
        torch.nn.SiLU(),
        torch.nn.Linear(16, 4),
        torch.nn.LogSoftmax(dim=-1),
    )
    got, expected = _run(model, [torch.rand(3, 8)], script=script)
    _close(got, expected, 1e-5)


def test_transformer_encoder_layer_matches_torch():
    layer = torch.nn.TransformerEncoderLayer(
        d_model=16, nhead=4, dim_feedforward=32, dropout=0.1, batch_first=True
    )
    got, expected = _run(layer, [torch.rand(2, 5, 16)], kind="vm")
    _close(got, expected, 1e-4)


class _DecoderLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerDecoderLayer(
            d_model=8, nhead=2, dim_feedforward=16, dropout=0.1, batch_first=True
        )

    def forward(self, x):
        return self.layer(x, x)


def test_scripted_transformer_decoder_layer_matches_torch():
    got, expected = _run(_DecoderLayer(), [torch.rand(2, 3, 8)], script=True)
    _close(got, expected, 1e-4)


class _Decoderish(torch.nn.Module):
    """Token embedding, causal self-attention through ``scaled_dot_product_attention``,
    layer norm and a tied output projection: the shape of a GPT-style decoder block."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(20, 16)
        self.qkv = torch.nn.Linear(16, 48)
        self.norm = torch.nn.LayerNorm(16)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(32, 16)
        )

    def forward(self, ids):
        x = self.embed(ids)
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(batch, length, 2, 8).transpose(1, 2)
        k = k.view(batch, length, 2, 8).transpose(1, 2)
        v = v.view(batch, length, 2, 8).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + a.transpose(1, 2).reshape(batch, length, 16)
        x = x + self.mlp(self.norm(x))
        return x @ self.embed.weight.t()


def test_decoder_block_with_integer_input_matches_torch():
    ids = torch.randint(0, 20, (2, 6))
    got, expected = _run(_Decoderish(), [ids], input_infos=[("ids", ((2, 6), "int64"))], kind="vm")
    _close(got, expected, 1e-4)


class _SegHead(torch.nn.Module):
    """Hardswish/hardsigmoid gating, average pooling, nearest and bilinear upsampling,
    clamp, cat and a tuple of two outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.gate = torch.nn.Conv2d(8, 8, 1)
        self.cls = torch.nn.Conv2d(16, 3, 1)

    def forward(self, x):
        f = torch.nn.functional.hardswish(self.conv(x))
        g = torch.nn.functional.hardsigmoid(self.gate(f.mean((2, 3), keepdim=True)))
        f = f * g
        small = torch.nn.functional.avg_pool2d(f, 2)
        up = torch.nn.functional.interpolate(small, scale_factor=2.0, mode="nearest")
        out = self.cls(torch.cat([f, up], dim=1))
        big = torch.nn.functional.interpolate(
            out, size=(16, 16), mode="bilinear", align_corners=True
        )
        return big.clamp(-1.0, 1.0), torch.nn.functional.relu6(out).sum(dim=1)


@pytest.mark.parametrize("script", [False, True], ids=["traced", "scripted"])
def test_segmentation_style_head_matches_torch(script):
    got, expected = _run(_SegHead(), [torch.rand(1, 4, 8, 8)], script=script)
    _close(got, expected, 1e-5)


class _InvertedResidual(torch.nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, 1x1 projection, ReLU6, and a
    residual connection when the shape allows it."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(cin, hidden, 1, bias=False),
            torch.nn.BatchNorm2d(hidden),
            torch.nn.ReLU6(inplace=True),
            torch.nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            torch.nn.BatchNorm2d(hidden),
            torch.nn.ReLU6(inplace=True),
            torch.nn.Conv2d(hidden, cout, 1, bias=False),
            torch.nn.BatchNorm2d(cout),
        )

    def forward(self, x):
        out = self.body(x)
        return x + out if self.residual else out


def _mobilenet_like(width: int, blocks: int) -> torch.nn.Module:
    layers = [
        torch.nn.Conv2d(3, width, 3, 2, 1, bias=False),
        torch.nn.BatchNorm2d(width),
        torch.nn.ReLU6(inplace=True),
    ]
    channels = width
    for i in range(blocks):
        out = channels if i % 2 else channels * 2
        layers.append(_InvertedResidual(channels, out, 1 if i % 2 else 2, 4))
        channels = out
    layers += [
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(channels, 10),
    ]
    return torch.nn.Sequential(*layers)


def test_mobilenet_style_network_matches_torch():
    got, expected = _run(_mobilenet_like(8, 2), [torch.rand(1, 3, 32, 32)])
    _close(got, expected, 1e-4)


# --- larger architectures (pytest -m slow) -----------------------------------------------------


def _resnet18_like() -> torch.nn.Module:
    """ResNet-18's layout and sizes, built from torch.nn (torchvision is not required)."""
    layers = [
        torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        torch.nn.BatchNorm2d(64),
        torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(3, 2, 1),
    ]
    channels = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            if s == 1 and channels == width:
                layers.append(_Residual(channels))
            else:
                layers.append(_BasicBlock(channels, width, s))
            channels = width
    layers += [torch.nn.AdaptiveAvgPool2d((1, 1)), torch.nn.Flatten(), torch.nn.Linear(512, 1000)]
    return torch.nn.Sequential(*layers)


class _Residual(torch.nn.Module):
    """A basic block without a projection (identity shortcut)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + x)


class _BertLike(torch.nn.Module):
    """A BERT-style encoder: token and position embeddings, layer norm, two encoder layers
    with GELU, and a pooled first token."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(1000, 64)
        self.positions = torch.nn.Embedding(32, 64)
        self.norm = torch.nn.LayerNorm(64, eps=1e-12)
        layer = torch.nn.TransformerEncoderLayer(
            64, 4, 128, dropout=0.1, activation="gelu", batch_first=True
        )
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.pool = torch.nn.Linear(64, 64)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.norm(self.tokens(ids) + self.positions(positions))
        x = self.encoder(x)
        return x, torch.tanh(self.pool(x[:, 0]))


@pytest.mark.slow
def test_resnet18_layout_matches_torch():
    got, expected = _run(_resnet18_like(), [torch.rand(1, 3, 224, 224)], kind="vm")
    _close(got, expected, 1e-3)


@pytest.mark.slow
def test_bert_like_encoder_matches_torch():
    ids = torch.randint(0, 1000, (2, 16))
    got, expected = _run(
        _BertLike(), [ids], input_infos=[("input_ids", ((2, 16), "int64"))], kind="vm"
    )
    _close(got, expected, 1e-4)
