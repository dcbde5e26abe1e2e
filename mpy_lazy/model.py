# Layer runner: a model is a layer description (docs/FORMAT.md, "Layer description", metadata
# key `layers`) whose weights are lazy Params bound by name from a container. No per-model glue:
#
#   c = mpy_lazy.open("/rom/cnn.mpyl")
#   m = mpy_lazy.model.from_container(c)      # declare(c): parse the `layers` metadata, make
#                                             # the layers and Params; then m.load(c): bind
#   y = m(x)                                  # x: flat floats in C, H, W order
#
# Each layer that makes a new activation (linear, conv2d, pools) owns its output buffer,
# allocated on the first call and reused after; relu and softmax work in place, flatten is
# free. On the 'ulab' kernel path ulab allocates its results (no out=).
from . import nn
from .container import ContainerError
from .module import Module, load
from .param import Param

# op -> (required keys, optional keys)
_OPS = {
    "input": (("shape",), ()),
    "linear": (("w", "in", "out"), ("b", "t")),
    "conv2d": (("w", "in", "out", "k"), ("b", "stride", "pad")),
    "maxpool": (("k",), ("stride",)),
    "avgpool": (("k",), ("stride",)),
    "relu": ((), ()),
    "flatten": ((), ()),
    "softmax": ((), ()),
}
_NAMES = ("w", "b")  # keys whose value is a tensor name; every other value is integers
_PAIRS = ("k", "stride", "pad")  # "3" means "3,3"


def _err(n, msg):
    return ContainerError("layers line %d: %s" % (n, msg), None, "layers")


def parse(text):
    """[(op, {key: value})] from a layer description. Values: tensor names (w, b) as str,
    k/stride/pad as (h, w) pairs, shape as a tuple, other keys as int."""
    layers = []
    n = 0
    for line in text.split("\n"):
        n += 1
        parts = line.split()
        if not parts or parts[0][0] == "#":
            continue
        op = parts[0]
        if op not in _OPS:
            raise _err(n, "unknown op %r" % op)
        kv = {}
        for p in parts[1:]:
            i = p.find("=")
            if i <= 0 or i == len(p) - 1:
                raise _err(n, "expected key=value, got %r" % p)
            key, val = p[:i], p[i + 1:]
            if key in kv:
                raise _err(n, "key %r given twice" % key)
            req, opt = _OPS[op]
            if key not in req and key not in opt:
                raise _err(n, "%s takes no key %r" % (op, key))
            if key in _NAMES:
                kv[key] = val
                continue
            try:
                ints = tuple(int(v) for v in val.split(","))
            except ValueError:
                raise _err(n, "%s=%s: expected integers" % (key, val))
            if any(v < 0 for v in ints):
                raise _err(n, "%s=%s: negative" % (key, val))
            if key in _PAIRS:
                if len(ints) == 1:
                    ints = ints * 2
                if len(ints) != 2:
                    raise _err(n, "%s=%s: expected one or two integers" % (key, val))
                kv[key] = ints
            elif key == "shape":
                if len(ints) not in (1, 3) or 0 in ints:
                    raise _err(n, "shape=%s: expected N or C,H,W (all >= 1)" % val)
                kv[key] = ints
            else:
                if len(ints) != 1:
                    raise _err(n, "%s=%s: expected one integer" % (key, val))
                kv[key] = ints[0]
        for key in _OPS[op][0]:
            if key not in kv:
                raise _err(n, "%s needs %s=" % (op, key))
        if op == "input" and layers:
            raise _err(n, "input must be the first line, and only once")
        if op != "input" and not layers:
            raise _err(n, "the first line must be input shape=...")
        layers.append((op, kv))
    if not layers:
        raise ContainerError("layers: empty description", None, "layers")
    return layers


def infer_shapes(layers, tensors=None):
    """Activation shape after each layer ([0] = the input). With tensors ({name: shape}),
    also check that every weight and bias exists with the shape its layer needs."""
    shape = layers[0][1]["shape"]
    shapes = [shape]
    for n, (op, kv) in enumerate(layers[1:], 2):
        if op == "linear":
            if len(shape) != 1 or shape[0] != kv["in"]:
                raise ContainerError("layer %d (linear): input shape %s, expected (%d,)%s"
                                     % (n, shape, kv["in"], " (add flatten)" if len(shape) == 3 else ""),
                                     None, "layers")
            if kv.get("t", 0) not in (0, 1):
                raise ContainerError("layer %d (linear): t must be 0 or 1" % n, None, "layers")
            wshape = (kv["in"], kv["out"]) if kv.get("t") else (kv["out"], kv["in"])
            shape = (kv["out"],)
        elif op == "conv2d":
            if len(shape) != 3:
                raise ContainerError("layer %d (conv2d): needs a C,H,W input, got %s" % (n, shape),
                                     None, "layers")
            wshape = (kv["out"], kv["in"]) + kv["k"]
            if 0 in kv["k"] or 0 in kv.get("stride", (1, 1)):
                raise ContainerError("layer %d (conv2d): k and stride must be >= 1" % n, None, "layers")
            shape = nn.conv_shape(shape, wshape, kv.get("stride", (1, 1)), kv.get("pad", (0, 0)))
        elif op in ("maxpool", "avgpool"):
            if len(shape) != 3 or 0 in kv["k"] or 0 in kv.get("stride", kv["k"]):
                raise ContainerError("layer %d (%s): needs a C,H,W input and k, stride >= 1" % (n, op),
                                     None, "layers")
            shape = nn.pool_shape(shape, kv["k"], kv.get("stride", kv["k"]))
        elif op == "flatten":
            size = 1
            for d in shape:
                size *= d
            shape = (size,)
        elif op == "softmax" and len(shape) != 1:
            raise ContainerError("layer %d (softmax): needs a flat input (add flatten)" % n, None, "layers")
        if op in ("linear", "conv2d") and tensors is not None:
            _check_tensor(tensors, kv["w"], wshape, n, op)
            if "b" in kv:
                _check_tensor(tensors, kv["b"], (kv["out"],), n, op)
        shapes.append(shape)
    return shapes


def _check_tensor(tensors, name, shape, n, op):
    if name not in tensors:
        raise ContainerError("layer %d (%s): no tensor %r" % (n, op, name), name, "layers")
    if tuple(tensors[name]) != tuple(shape):
        raise ContainerError("layer %d (%s): tensor %r has shape %s, expected %s"
                             % (n, op, name, tuple(tensors[name]), shape), name, "layers")


class Layer(Module):
    """One layer: its op, its settings, its Params (weight, bias) when it has any."""

    # set on the instance by the first forward pass (instance attributes cost heap)
    _out = None  # output buffer, reused between calls
    _w = None  # (source, nn.Weight) cache
    _b = None

    def __init__(self, op, kv, in_shape, out_shape, init=None):
        self.op = op
        self.kv = kv
        self.in_shape = in_shape
        self.out_shape = out_shape
        if op == "linear":
            wshape = (kv["in"], kv["out"]) if kv.get("t") else (kv["out"], kv["in"])
        elif op == "conv2d":
            wshape = (kv["out"], kv["in"]) + kv["k"]
        else:
            return
        self.weight = Param(wshape, init=init)
        if "b" in kv:
            self.bias = Param((kv["out"],), init=init)

    def _weight(self, p, cache):
        src = p.val()
        if cache is not None and cache[0] is src:
            return cache
        w = nn.weight(src) if p.view is not None else nn.ram_weight(src, p.shape)
        return (src, w)

    def __call__(self, x):
        op, kv = self.op, self.kv
        if op in ("relu", "softmax", "flatten"):
            if op == "relu":
                return nn.relu(x)
            if op == "softmax":
                return nn.softmax(x)
            return x if not hasattr(x, "shape") else x.reshape((x.size,))
        out = self._buffer()
        if op in ("maxpool", "avgpool"):
            f = nn.maxpool if op == "maxpool" else nn.avgpool
            return f(x, self.in_shape, kv["k"], kv.get("stride", kv["k"]), out)
        self._w = self._weight(self.weight, self._w)
        b = None
        if "b" in kv:
            self._b = self._weight(self.bias, self._b)
            b = self._b[1]
        if op == "linear":
            return nn.linear(x, self._w[1], b, kv.get("t", 0), out)
        return nn.conv2d(x, self.in_shape, self._w[1], b, kv.get("stride", (1, 1)),
                         kv.get("pad", (0, 0)), out)

    def _buffer(self):
        if nn.path() == "ulab":
            return None
        n = 1
        for d in self.out_shape:
            n *= d
        if self._out is None:
            self._out = nn._new(n)
        return self._out


class Sequential(Module):
    """A chain of layers built from a layer description: the model's declaration, nothing is
    bound (Params stay uninit) until load(). Params are named layers.<i>.weight / .bias;
    `names` maps them to the container's tensor names (used by load()). init: the Params'
    init function (Param API), used only by params that are never bound."""

    _in = None  # input buffer, set by the first forward pass

    def __init__(self, text, init=None):
        parsed = parse(text)
        shapes = infer_shapes(parsed)
        self.input_shape = shapes[0]
        self.output_shape = shapes[-1]
        self.layers = [Layer(parsed[i][0], parsed[i][1], shapes[i - 1], shapes[i], init)
                       for i in range(1, len(parsed))]

    @property
    def names(self):
        """{param name: tensor name}, built on each use (load() needs it once)."""
        names = {}
        for j, layer in enumerate(self.layers):
            if "w" in layer.kv:
                names["layers.%d.weight" % j] = layer.kv["w"]
            if "b" in layer.kv:
                names["layers.%d.bias" % j] = layer.kv["b"]
        return names

    def load(self, container, strict=True):
        """Bind the weights from a container (mpy_lazy.load with `names`); no init runs."""
        return load(self, container, strict, rename=self.names)

    def macs(self):
        """Multiply-accumulates of one forward pass."""
        total = 0
        for layer in self.layers:
            if layer.op in ("linear", "conv2d"):
                n = 1
                for d in layer.weight.shape:
                    n *= d
                if layer.op == "conv2d":
                    n *= layer.out_shape[1] * layer.out_shape[2]
                total += n
        return total

    def __call__(self, x):
        """Forward pass of one sample: x is a flat sequence of floats (C, H, W order) or an
        activation of the current kernel path. Returns the output activation."""
        x = self._input(x)
        for layer in self.layers:
            x = layer(x)
        return x

    def predict(self, x):
        return nn.argmax(self(x))

    def _input(self, x):
        n = 1
        for d in self.input_shape:
            n *= d
        if nn.path() == "ulab":
            if hasattr(x, "shape"):
                return x
            return nn.act(x, self.input_shape)
        if self._in is None:
            self._in = nn._new(n)
        if x is self._in:
            return x
        buf = self._in
        if len(x) != n:
            raise ValueError("input has %d values, the model takes %d" % (len(x), n))
        for i in range(n):
            buf[i] = x[i]
        return buf


def declare(c):
    """The model declared by the container's `layers` metadata, nothing bound (Sequential).
    Only that one metadata value is read: the metadata dict is not decoded and kept."""
    text = c._meta_get("layers")
    if text is None:
        raise ContainerError("container has no 'layers' metadata", None, "layers")
    return Sequential(text)


def from_container(c, strict=True):
    """declare(c), then bind its weights from c (load)."""
    m = declare(c)
    m.load(c, strict)
    return m
