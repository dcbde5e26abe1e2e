"""The graph as the host tools hold it before packing: what the ONNX and TFLite importers
produce, what calibration and int8 quantization transform, and what `pack` writes (the graph
description of docs/FORMAT.md plus its tensors). Values are NHWC: (H, W, C) or (N,)."""
import numpy as np

from .container import PackError


class Node:
    """One op: `op` (a graph description op), input value names `x`, output value `y`,
    `attrs` (the description's other keys), `t` (key -> tensor name), `src` (where it came
    from, for messages)."""

    def __init__(self, op, x, y, src="", **attrs):
        self.op = op
        self.x = list(x)
        self.y = y
        self.attrs = attrs
        self.t = {}
        self.src = src

    def __repr__(self):
        return "<Node %s %s -> %s %s>" % (self.op, self.x, self.y, self.attrs)


class Graph:
    def __init__(self):
        self.inputs = []  # [(name, shape, layout)]
        self.outputs = []  # [name]
        self.out_layouts = {}  # output name -> 'chw' (an H,W,C value the caller reads C, H, W); default hwc
        self.nodes = []
        self.tensors = {}  # name -> numpy array (as stored)
        self.wquant = {}  # name -> per-channel scales (float32) of an int8 weight, axis 0
        self.q = {}  # value name -> (scale, zero point) of an integer value
        self.dtypes = {}  # value name -> i16 or i32 (an integer value not i8; f32 without q)
        self.dropped = []  # indices of the source model's inputs the graph does not take
        self.shapes = {}  # value name -> shape

    def add_tensor(self, name, arr):
        """Register tensor `arr` under a unique name (suffixing _1, _2... on collisions)."""
        base, k = name, 1
        while name in self.tensors:
            name = "%s_%d" % (base, k)
            k += 1
        self.tensors[name] = arr
        return name

    def producer(self, value):
        for n in self.nodes:
            if n.y == value:
                return n
        return None

    def consumers(self, value):
        return [n for n in self.nodes if value in n.x]

    def rename_value(self, old, new):
        for n in self.nodes:
            n.x = [new if v == old else v for v in n.x]
            if n.y == old:
                n.y = new
        self.outputs = [new if v == old else v for v in self.outputs]
        if old in self.out_layouts:
            self.out_layouts[new] = self.out_layouts.pop(old)
        for table in (self.shapes, self.q, self.dtypes):
            if old in table:
                table[new] = table.pop(old)

    def int8(self):
        return bool(self.q)

    def text(self):
        """The graph description (docs/FORMAT.md). Values other than the inputs and outputs
        are named v1, v2, ... in order (short names: the board keeps them in RAM)."""
        return self._text()[0]

    def _text(self):
        names = {}
        for name, _, _ in self.inputs:
            names[name] = name
        for name in self.outputs:
            names[name] = name
        k = 0
        for n in self.nodes:
            if n.y not in names:
                k += 1
                names[n.y] = "v%d" % k
        lines = []
        for name, shape, layout in self.inputs:
            parts = ["input", "y=" + name, "shape=" + _ints(shape)]
            if name in self.q:
                parts += ["dtype=" + self.dtypes.get(name, "i8"), "q=" + _q(self.q[name])]
            elif self.dtypes.get(name) == "bool":
                parts.append("dtype=bool")
            if layout != "hwc":
                parts.append("layout=" + layout)
            lines.append(" ".join(parts))
        for n in self.nodes:
            parts = [n.op] + (["x=" + ",".join(names[v] for v in n.x)] if n.x else []) + ["y=" + names[n.y]]
            for key in ("w", "r", "b", "m", "t"):
                if key in n.t:
                    parts.append("%s=%s" % (key, n.t[key]))
            for key, v in n.attrs.items():
                if v is None:
                    continue
                if isinstance(v, (tuple, list)):
                    v = _ints(v)
                elif isinstance(v, float):
                    v = repr(v)
                parts.append("%s=%s" % (key, v))
            if n.y in self.q and n.op not in ("dequantize",):
                parts.append("q=" + _q(self.q[n.y]))
            lines.append(" ".join(parts))
        for name in self.outputs:
            layout = self.out_layouts.get(name, "hwc")
            lines.append("output x=" + name + ("" if layout == "hwc" else " layout=" + layout))
        for line in lines:
            for tok in line.split()[1:]:
                if tok.count("=") != 1 and not tok.startswith(("x=", "y=")):
                    raise PackError("graph: cannot write %r (a name with '=' or spaces?)" % tok)
        return "\n".join(lines), names

    def check(self):
        """Declare the description with the runtime's own parser and check every tensor's
        shape against the Param it binds: what the board would do, refused here."""
        from mpy_lazy import ContainerError
        from mpy_lazy.model import Model

        text, vnames = self._text()
        try:
            m = Model(text)
        except ContainerError as e:
            raise PackError(self._source(str(e)))
        declared = {vnames[k]: v for k, v in self.shapes.items() if k in vnames}
        src = {vnames[n.y]: n.src for n in self.nodes if n.src}
        for v in m.values:  # a model file's own shapes must be what its ops compute
            want = declared.get(v.name)
            if want is not None and tuple(want) != tuple(v.shape):
                raise PackError("%s: its output is declared %s but the op computes %s"
                                % (src.get(v.name, "graph: value " + v.name), tuple(want), tuple(v.shape)))
        names = m.names()
        for pname, p in m.named_params():
            t = names[pname]
            if t not in self.tensors:
                raise PackError("graph: no tensor %r" % t)
            if tuple(self.tensors[t].shape) != tuple(p.shape):
                raise PackError("graph: tensor %r has shape %s, the op needs %s"
                                % (t, tuple(self.tensors[t].shape), tuple(p.shape)))
        return m


    def _source(self, msg):
        """A graph error as its source node's (`graph line N: ...` -> that node's `src: ...`):
        the refusal names the model's op, not a line of a description the user never saw."""
        import re

        m = re.match(r"graph line (\d+): (.*)", msg)
        i = int(m.group(1)) - 1 - len(self.inputs) if m else -1
        if 0 <= i < len(self.nodes) and self.nodes[i].src:
            return "%s: %s" % (self.nodes[i].src, m.group(2))
        return msg


def _ints(v):
    return ",".join(str(int(i)) for i in v)


def _q(q):
    return "%r,%d" % (float(np.float32(q[0])), int(q[1]))
