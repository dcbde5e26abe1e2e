"""Layer descriptions (docs/FORMAT.md, "Layer description"): export from a torch.nn.Sequential
or from an ONNX graph, and check one against the tensors of a container.

The text is parsed by the runtime's own parser (`mpy_lazy.model.parse`), so host and board read
it the same way."""
import os

from mpy_lazy.model import parse, infer_shapes

from .container import PackError


def _line(op, **kv):
    parts = [op]
    for key, value in kv.items():
        if value is None:
            continue
        if isinstance(value, (tuple, list)):
            value = ",".join(str(int(v)) for v in value)
        value = str(value)
        if not value or " " in value or "\n" in value or "=" in value:
            raise PackError("layer %s: value %r of %s= cannot be written (no spaces, '=' or newlines)"
                            % (op, value, key))
        parts.append("%s=%s" % (key, value))
    return " ".join(parts)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(int(x) for x in v)


def _finish(lines):
    text = "\n".join(lines)
    try:
        infer_shapes(parse(text))
    except ValueError as e:
        raise PackError("layer description: %s" % e)
    return text


def from_torch(model, input_shape):
    """Layer description of a torch.nn.Sequential (nested Sequentials are flattened).

    input_shape: one sample's shape without the batch dimension, e.g. (1, 8, 8) or (64,)."""
    import torch.nn as nn

    lines = [_line("input", shape=input_shape)]
    for prefix, m in model.named_modules():
        if list(m.children()):
            if isinstance(m, nn.Sequential):
                continue
            raise PackError("%s: only nn.Sequential containers can be exported" % (prefix or "model"))
        p = prefix + "." if prefix else ""
        what = "%s (%s)" % (prefix or "model", type(m).__name__)
        bias = p + "bias" if getattr(m, "bias", None) is not None else None
        if isinstance(m, nn.Linear):
            lines.append(_line("linear", w=p + "weight", b=bias, **{"in": m.in_features}, out=m.out_features))
        elif isinstance(m, nn.Conv2d):
            if m.groups != 1 or _pair(m.dilation) != (1, 1) or m.padding_mode != "zeros" \
                    or isinstance(m.padding, str):
                raise PackError("%s: only groups=1, dilation=1, numeric zero padding are supported" % what)
            lines.append(_line("conv2d", w=p + "weight", b=bias, **{"in": m.in_channels}, out=m.out_channels,
                               k=_pair(m.kernel_size), stride=_pair(m.stride), pad=_pair(m.padding)))
        elif isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)):
            if _pair(m.padding) != (0, 0) or m.ceil_mode or _pair(getattr(m, "dilation", 1)) != (1, 1):
                raise PackError("%s: only padding=0, dilation=1, ceil_mode=False are supported" % what)
            op = "maxpool" if isinstance(m, nn.MaxPool2d) else "avgpool"
            lines.append(_line(op, k=_pair(m.kernel_size), stride=_pair(m.stride or m.kernel_size)))
        elif isinstance(m, nn.ReLU):
            lines.append("relu")
        elif isinstance(m, nn.Flatten):
            if m.start_dim != 1 or m.end_dim != -1:
                raise PackError("%s: only Flatten(start_dim=1, end_dim=-1) is supported" % what)
            lines.append("flatten")
        elif isinstance(m, nn.Softmax):
            if m.dim not in (1, -1):
                raise PackError("%s: only softmax over the features (dim=1 or -1) is supported" % what)
            lines.append("softmax")
        elif isinstance(m, (nn.Dropout, nn.Identity)):
            continue  # identity at inference
        else:
            raise PackError("%s: layer type not supported by the layer runner" % what)
    return _finish(lines)


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def from_onnx(model):
    """Layer description of an ONNX graph that is a chain of supported ops.

    model: a path or an onnx.ModelProto. Raises PackError naming the first unsupported node."""
    import onnx
    from onnx import numpy_helper

    if isinstance(model, (str, os.PathLike)):
        try:
            model = onnx.load(str(model), load_external_data=False)
        except Exception as e:  # protobuf DecodeError and friends on a damaged file
            raise PackError("%s: not a valid ONNX model: %s" % (model, (str(e).strip() or type(e).__name__).splitlines()[0]))
    g = model.graph
    inits = {t.name: tuple(t.dims) for t in g.initializer}
    consts = {}  # small constant tensors (Reshape targets)
    for t in g.initializer:
        if len(t.dims) == 1 and t.data_type == onnx.TensorProto.INT64:
            consts[t.name] = numpy_helper.to_array(t).tolist()
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1:
        raise PackError("ONNX graph: expected one input, found %d" % len(inputs))
    dims = [d.dim_value for d in inputs[0].type.tensor_type.shape.dim][1:]
    if not dims or any(d <= 0 for d in dims):
        raise PackError("ONNX graph: input %r needs a static shape after the batch dimension"
                        % inputs[0].name)
    lines = [_line("input", shape=dims)]
    current = inputs[0].name
    nodes = list(g.node)
    i = 0
    while i < len(nodes):
        node = nodes[i]
        i += 1
        what = "ONNX node %r (%s)" % (node.name or node.output[0], node.op_type)
        a = _attrs(node)
        op = node.op_type
        if op == "Constant":
            value = a.get("value")
            if value is not None and len(value.dims) == 1:
                consts[node.output[0]] = numpy_helper.to_array(value).tolist()
                continue
            raise PackError("%s: only 1-D constants (reshape targets) are supported" % what)
        if not node.input or node.input[0] != current:
            raise PackError("%s: the graph is not a single chain of layers" % what)
        if op == "Gemm":
            if a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0 or a.get("transA", 0):
                raise PackError("%s: only alpha=1, beta=1, transA=0 are supported" % what)
            w = node.input[1]
            if w not in inits or len(inits[w]) != 2:
                raise PackError("%s: weight must be a 2-D initializer" % what)
            b = node.input[2] if len(node.input) > 2 and node.input[2] else None
            t = 0 if a.get("transB", 0) else 1
            n_out, n_in = inits[w] if not t else inits[w][::-1]
            lines.append(_line("linear", w=w, b=b, **{"in": n_in}, out=n_out, t=t or None))
        elif op == "MatMul":
            w = node.input[1]
            if w not in inits or len(inits[w]) != 2:
                raise PackError("%s: the second input must be a 2-D initializer" % what)
            b = None
            nxt = nodes[i] if i < len(nodes) else None
            if nxt is not None and nxt.op_type == "Add" and node.output[0] in nxt.input:
                other = [x for x in nxt.input if x != node.output[0]]
                if len(other) == 1 and other[0] in inits and inits[other[0]] == (inits[w][1],):
                    b = other[0]
                    node = nxt
                    i += 1
            lines.append(_line("linear", w=w, b=b, **{"in": inits[w][0]}, out=inits[w][1], t=1))
        elif op == "Conv":
            if a.get("group", 1) != 1 or list(a.get("dilations", [1, 1])) != [1, 1]:
                raise PackError("%s: only group=1, dilations=1 are supported" % what)
            w = node.input[1]
            if w not in inits or len(inits[w]) != 4:
                raise PackError("%s: weight must be a 4-D initializer" % what)
            pads = list(a.get("pads", [0, 0, 0, 0]))
            if pads[:2] != pads[2:] or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise PackError("%s: only explicit symmetric pads are supported" % what)
            b = node.input[2] if len(node.input) > 2 and node.input[2] else None
            o, c, kh, kw = inits[w]
            lines.append(_line("conv2d", w=w, b=b, **{"in": c}, out=o, k=(kh, kw),
                               stride=a.get("strides", [1, 1]), pad=pads[:2]))
        elif op in ("MaxPool", "AveragePool"):
            if any(a.get("pads", [0])) or a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1])) \
                    or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise PackError("%s: only pads=0, dilations=1, ceil_mode=0 are supported" % what)
            k = a["kernel_shape"]
            lines.append(_line("maxpool" if op == "MaxPool" else "avgpool", k=k, stride=a.get("strides", k)))
        elif op == "Relu":
            lines.append("relu")
        elif op == "Flatten":
            if a.get("axis", 1) != 1:
                raise PackError("%s: only axis=1 is supported" % what)
            lines.append("flatten")
        elif op == "Reshape":
            target = consts.get(node.input[1])
            if target is None or len(target) != 2 or target[0] not in (1, -1, 0) and target[1] not in (-1,):
                raise PackError("%s: only a reshape to (batch, features) is supported" % what)
            lines.append("flatten")
        elif op == "Softmax":
            if a.get("axis", -1) not in (1, -1):
                raise PackError("%s: only softmax over the features is supported" % what)
            lines.append("softmax")
        elif op in ("Identity", "Dropout"):
            pass
        else:
            raise PackError("%s: op not supported by the layer runner" % what)
        current = node.output[0]
    outputs = [o.name for o in g.output]
    if outputs != [current]:
        raise PackError("ONNX graph: the chain ends at %r but the graph output is %s" % (current, outputs))
    return _finish(lines)


def check(text, shapes):
    """Check a layer description against {tensor name: shape}; PackError on any mismatch."""
    try:
        layers = parse(text)
        infer_shapes(layers, shapes)
    except ValueError as e:
        raise PackError("layer description: %s" % e)
    return layers


def layers_meta(inputs, meta, layers_file, include=(), exclude=(), renames=(), quiet=False):
    """The pack command's metadata with the layer description added (key `layers`): from
    `layers_file`, else from a single ONNX input whose graph the layer runner supports (an
    unsupported graph is packed without one, with a note). Checked against the tensors that
    will be packed; a --layers file that does not match them is an error."""
    from .pack import select
    from .readers import detect, read

    if any(k == "layers" for k, _ in meta):
        text, given = dict(meta)["layers"], True
    elif layers_file:
        try:
            with open(layers_file, encoding="utf-8") as f:
                text = f.read().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise PackError("--layers %s: %s" % (layers_file, getattr(e, "strerror", None) or e))
        given = True
    elif len(inputs) == 1 and detect(inputs[0]) == "onnx":
        try:
            text = from_onnx(inputs[0])
        except Exception as e:  # best effort: a damaged graph is reported by read() below
            if not quiet:
                print("note: no layer description recorded: %s" % e)
            return meta
        given = False
    else:
        return meta
    sources = select([s for p in inputs for s in read(p)], include, exclude, renames)
    try:
        check(text, {s.name: s.shape for s in sources})
    except PackError as e:
        if given:
            raise
        if not quiet:
            print("note: no layer description recorded: %s" % e)
        return meta
    return [(k, v) for k, v in meta if k != "layers"] + [("layers", text)]
