# Layer runner (mpy_lazy.model): the layer description parser and a model run end to end with
# owned (initialized) params on every kernel path. Containers with a `layers` entry are run by
# tests/host/test_layers.py (packed there, run on both interpreters).
from rt_util import raises

from mpy_lazy import ContainerError, nn, state
from mpy_lazy.model import Sequential, infer_shapes, parse

CNN = """input shape=1,6,6
conv2d w=c1.w b=c1.b in=1 out=2 k=3 stride=1 pad=1
relu
maxpool k=2
# a comment line
conv2d w=c2.w in=2 out=3 k=2,2 stride=1,1
flatten
linear w=fc.w b=fc.b in=12 out=4
softmax"""


def test_parse():
    layers = parse(CNN)
    assert [op for op, _ in layers] == ["input", "conv2d", "relu", "maxpool", "conv2d", "flatten",
                                        "linear", "softmax"]
    assert layers[0][1] == {"shape": (1, 6, 6)}
    assert layers[1][1] == {"w": "c1.w", "b": "c1.b", "in": 1, "out": 2, "k": (3, 3),
                            "stride": (1, 1), "pad": (1, 1)}
    assert layers[3][1] == {"k": (2, 2)}
    shapes = infer_shapes(layers)
    assert shapes == [(1, 6, 6), (2, 6, 6), (2, 6, 6), (2, 3, 3), (3, 2, 2), (12,), (4,), (4,)]
    tensors = {"c1.w": (2, 1, 3, 3), "c1.b": (2,), "c2.w": (3, 2, 2, 2), "fc.w": (4, 12), "fc.b": (4,)}
    infer_shapes(layers, tensors)
    tensors["fc.w"] = (12, 4)
    e = raises(ContainerError, infer_shapes, layers, tensors)
    assert "fc.w" in str(e) and "(4, 12)" in str(e)
    del tensors["c1.b"]
    assert "c1.b" in str(raises(ContainerError, infer_shapes, layers, tensors))


def test_parse_errors():
    bad = (
        "",
        "relu",  # no input line
        "input shape=1,8",  # 2-D input
        "input shape=4\nsigmoid",
        "input shape=4\nlinear w=a in=4",  # out missing
        "input shape=4\nlinear w=a in=4 out=2 in=4",
        "input shape=4\nlinear w=a in=x out=2",
        "input shape=4\nlinear w=a in=4 out=2 k=3",
        "input shape=4\nlinear w=a in=4 out=2 junk",
        "input shape=4\ninput shape=4",
        "input shape=1,4,4\nmaxpool k=1,2,3",
    )
    for text in bad:
        e = raises(ContainerError, parse, text)
        assert "layers" in str(e), text
    shape_errors = (
        "input shape=1,4,4\nlinear w=a in=16 out=2",  # needs flatten
        "input shape=5\nlinear w=a in=4 out=2",
        "input shape=1,4,4\nconv2d w=a in=2 out=2 k=3",  # channels
        "input shape=1,2,2\nconv2d w=a in=1 out=2 k=3",  # kernel larger than input
        "input shape=1,4,4\nsoftmax",
        "input shape=4\nmaxpool k=2",
        "input shape=1,4,4\nmaxpool k=0",
    )
    for text in shape_errors:
        raises(ContainerError, infer_shapes, parse(text))


def _init(shape, dtype):
    n = 1
    for d in shape:
        n *= d
    return [((i * 7919) % 23 - 11) / 10.0 for i in range(n)]


def test_sequential_owned_params_all_paths():
    m = Sequential(CNN, init=_init)
    assert m.input_shape == (1, 6, 6) and m.output_shape == (4,)
    names = [n for n, _ in m.named_params()]
    assert names == ["layers.0.bias", "layers.0.weight", "layers.3.weight", "layers.5.bias",
                     "layers.5.weight"]
    assert m.names["layers.5.weight"] == "fc.w" and m.names["layers.0.bias"] == "c1.b"
    assert m.macs() == 2 * 9 * 36 + 3 * 8 * 4 + 48
    x = [((i * 13) % 17) / 8.0 - 1.0 for i in range(36)]
    outs = []
    for path in nn.available():
        nn.use(path)
        y = nn.tolist(m(x))
        assert abs(sum(y) - 1.0) < 1e-5  # softmax
        outs.append(y)
        assert m.predict(x) == y.index(max(y))
    nn.use()
    for y in outs[1:]:
        for a, b in zip(y, outs[0]):
            assert abs(a - b) < 1e-5
    assert all(s[1] == "owned" for s in state(m))
    assert raises(ValueError, m, [0.0] * 35)
