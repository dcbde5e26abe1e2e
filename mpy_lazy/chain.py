# Reading the layer chains of earlier containers (metadata key `layers`, docs/FORMAT.md "Layer
# chain (read only)"): each becomes the equivalent graph description. Their images are C, H, W
# (torch) and their weights torch/ONNX layouts, which the graph runner reads in place.
from .container import ContainerError

_KEYS = {"input": ("shape",), "linear": ("w", "b", "in", "out", "t"),
         "conv2d": ("w", "b", "in", "out", "k", "stride", "pad"), "maxpool": ("k", "stride"),
         "avgpool": ("k", "stride"), "relu": (), "flatten": (), "softmax": ()}


def _err(n, msg):
    return ContainerError("layers line %d: %s" % (n, msg), None, "layers")


def to_graph(text):
    """The graph description of a layer chain."""
    out = []
    cur = None
    n = 0
    k = 0
    for line in text.split("\n"):
        n += 1
        parts = line.split()
        if not parts or parts[0][0] == "#":
            continue
        op = parts[0]
        if op not in _KEYS:
            raise _err(n, "unknown op %r" % op)
        kv = {}
        for p in parts[1:]:
            i = p.find("=")
            if i <= 0 or p[:i] not in _KEYS[op] or p[:i] in kv:
                raise _err(n, "%s: bad or repeated key in %r" % (op, p))
            kv[p[:i]] = p[i + 1:]
        if (op == "input") != (cur is None):
            raise _err(n, "the first line, and only it, is input shape=...")
        k += 1
        y = "v%d" % k
        if op == "input":
            dims = kv.get("shape", "").split(",")
            if len(dims) == 3:
                out.append("input y=%s shape=%s,%s,%s layout=chw" % (y, dims[1], dims[2], dims[0]))
            else:
                out.append("input y=%s shape=%s" % (y, kv.get("shape")))
        elif op == "linear":
            out.append("linear x=%s y=%s w=%s out=%s wl=%s%s" % (
                cur, y, kv.get("w"), kv.get("out"), "io" if kv.get("t") == "1" else "oi",
                " b=" + kv["b"] if "b" in kv else ""))
        elif op == "conv2d":
            out.append("conv2d x=%s y=%s w=%s out=%s k=%s wl=oihw stride=%s pad=%s%s" % (
                cur, y, kv.get("w"), kv.get("out"), kv.get("k"), kv.get("stride", "1"),
                kv.get("pad", "0"), " b=" + kv["b"] if "b" in kv else ""))
        elif op in ("maxpool", "avgpool"):
            out.append("%s x=%s y=%s k=%s stride=%s" % (op, cur, y, kv.get("k"), kv.get("stride", kv.get("k"))))
        elif op == "flatten":
            out.append("reshape x=%s y=%s shape=-1 order=chw" % (cur, y))
        else:
            out.append("%s x=%s y=%s" % (op, cur, y))
        cur = y
    if cur is None:
        raise ContainerError("layers: empty description", None, "layers")
    out.append("output x=%s" % cur)
    return "\n".join(out)
