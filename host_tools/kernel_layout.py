"""The weights of an int8 graph in the layouts the board's kernels read fastest: what `mpy-lazy
pack` does after importing a model. Only the order of the weight bytes and the ops' `wl` change
(and a depthwise op with one input channel becomes the conv2d it is); the integers every kernel
path computes are the same (docs/FORMAT.md, `wl`):

- int8 conv2d, groups 1, out a multiple of 8: `ohwi8`, [out/8, kh, kw, 8 C] (output 8 b + j,
  input channel ci at [b, ky, kx, 8 ci + j]): the assembler
  kernel (mpy_lazy/_thumb.py conv8) reads one word of weights for 4 outputs and each input byte
  once for 8 outputs;
- int8 depthwise on one input channel (a first layer on a grayscale image: person_detect's is
  1 -> 8 channels): conv2d with out = mult (TFLM computes the same sums and requantization), then
  `ohwi8` as above;
- int8 linear, out a multiple of 8: `oi8`, [out/8, 8 in] (output 8 b + j, input i at [b, 8 i + j]).

A tensor read by more than one op is left as it is."""
import numpy as np


def for_kernels(g):
    """Rewrite g (an ir.Graph) in place; returns it."""
    uses = {}
    for n in g.nodes:
        for name in n.t.values():
            uses[name] = uses.get(name, 0) + 1
    m = g.check()  # the runtime's own view: input shapes of every op
    for n, op in zip(g.nodes, m.ops):
        if n.op not in ("conv2d", "depthwise", "linear") or "w" not in n.t or uses[n.t["w"]] != 1:
            continue
        if n.y not in g.q or g.dtypes.get(n.y, "i8") != "i8":
            continue  # float, or 16x8
        name = n.t["w"]
        w = g.tensors[name]
        if n.op == "depthwise":
            shape = op.x[0].shape
            if len(shape) != 3 or shape[2] != 1:
                continue
            # [1, kh, kw, out] (1hwo) or [out, 1, kh, kw] (o1hw) -> [out, kh, kw, 1]
            w = w.transpose(3, 1, 2, 0) if n.attrs.get("wl", "1hwo") == "1hwo" else w.transpose(0, 2, 3, 1)
            n.op = "conv2d"
            n.attrs.pop("mult", None)
            n.attrs["out"] = int(w.shape[0])
            n.attrs["wl"] = "ohwi"
        if n.op == "conv2d":
            if n.attrs.get("groups", 1) != 1 or w.shape[0] % 8:
                g.tensors[name] = np.ascontiguousarray(w)
                continue
            if n.attrs.get("wl", "ohwi") == "oihw":
                w = w.transpose(0, 2, 3, 1)
            oc, kh, kw, c = w.shape
            w = w.reshape(oc // 8, 8, kh, kw, c).transpose(0, 2, 3, 4, 1).reshape(oc // 8, kh, kw, 8 * c)
            n.attrs["wl"] = "ohwi8"
        else:
            if w.shape[0 if n.attrs.get("wl", "oi") == "oi" else 1] % 8:
                continue
            if n.attrs.get("wl", "oi") == "io":
                w = w.T
            out, n_in = w.shape
            w = w.reshape(out // 8, 8, n_in).transpose(0, 2, 1).reshape(out // 8, 8 * n_in)
            n.attrs["wl"] = "oi8"
        g.tensors[name] = np.ascontiguousarray(w)
        g.wquant.pop(name, None)  # (per-channel scales along one axis: not this layout's)
    g.check()
    return g
