# Modules (a tree of Params), loading a container into them, and memory accounting.
import array
import sys

from . import backend
from .container import ContainerError
from .param import Param


class Module:
    """Base class of a model. Its parameters are attributes holding Params, sub-Modules, or
    lists/tuples of them; their names are dotted paths ('fc1.weight', 'layers.0.bias')."""

    def named_params(self):
        """[(name, Param)] sorted by name."""
        out = []
        _walk(self, "", out, {})
        out.sort(key=lambda t: t[0])
        return out

    def params(self):
        return [p for _, p in self.named_params()]

    def clone(self, arrays=False):
        """A copy of the module tree with every Param cloned (Param.clone semantics), each
        object once: a Param or Module reachable twice (tied weights, a shared block) is one
        object in the clone too. The clone's RAM buffers are its own: bytearray, array.array
        (and numpy arrays owning their data) held as attributes are copied. Other attributes
        (numbers, strings, functions, memoryviews, ulab arrays) are shared."""
        return _clone_module(self, arrays, {})


def _walk(obj, prefix, out, seen):
    if id(obj) in seen:  # a module reachable twice (or a cycle) is listed once
        return
    seen[id(obj)] = True
    d = obj.__dict__
    for k in sorted(d):  # sorted: the same names on every interpreter, for a clone too
        _add(prefix, k, d[k], out, seen)


def _add(prefix, key, v, out, seen):
    # names are built only for what holds params: a model's many other tuples cost nothing
    if isinstance(v, Param):
        if id(v) not in seen:
            seen[id(v)] = True
            out.append(("%s%s" % (prefix, key), v))
    elif isinstance(v, Module):
        _walk(v, "%s%s." % (prefix, key), out, seen)
    elif isinstance(v, (list, tuple)) and _holds(v):
        for i in range(len(v)):
            _add("%s%s." % (prefix, key), i, v[i], out, seen)


def _holds(seq):
    for x in seq:
        if isinstance(x, (Param, Module)) or isinstance(x, (list, tuple)) and _holds(x):
            return True
    return False


def _clone_module(m, arrays, memo):
    c = object.__new__(type(m))
    memo[id(m)] = c
    for k, v in m.__dict__.items():
        setattr(c, k, _clone(v, arrays, memo, True))
    return c


def _clone(v, arrays, memo, attr=False):
    if isinstance(v, (Param, Module, list)):
        c = memo.get(id(v))
        if c is not None:  # reachable twice: one clone per original object
            return c
        if isinstance(v, Param):
            c = v.clone(arrays)
        elif isinstance(v, Module):
            if type(v).clone is not Module.clone:  # its own clone (e.g. a graph Model)
                c = v.clone(arrays)
            else:
                return _clone_module(v, arrays, memo)
        else:
            c = []
            memo[id(v)] = c  # before the items: a list holding itself
            for x in v:
                c.append(_clone(x, arrays, memo))
            return c
        memo[id(v)] = c
        return c
    if isinstance(v, tuple):
        return tuple([_clone(x, arrays, memo) for x in v])
    if attr and _owned_buffer(v):
        return bytearray(v) if isinstance(v, bytearray) else backend.copy_array(v)
    return v


def _owned_buffer(v):
    """A RAM buffer a module holds as its own state: bytearray, array.array, a numpy array
    owning its data. (A ulab array may be a view of flash, a memoryview is one: shared.)"""
    if isinstance(v, (bytearray, array.array)):
        return True
    try:  # (uctypes objects raise TypeError for attributes they lack)
        return v.__array_interface__ is not None and bool(v.flags.owndata)
    except (AttributeError, TypeError):
        return False


def load(model, container, strict=True, prefix="", rename=None):
    """Bind every Param of `model` to the container tensor of the same name, without running
    any init function. The tensor name of param `n` is rename[n] if rename has it, else
    prefix + n. strict: any missing tensor, unexpected tensor (a non-AUX tensor under `prefix`
    that no param takes) or shape/dtype mismatch raises ONE ContainerError (field 'load', with
    .missing, .unexpected, .mismatched lists) and nothing is bound. strict=False binds what
    matches. Either way load is all or nothing: if a load mapper (or making a view) raises, no
    param has changed. Returns {'bound': n, 'missing': [...], 'unexpected': [...],
    'mismatched': [...]}."""
    rename = rename or {}
    plan, missing, mismatched, used = [], [], [], {}
    for name, p in model.named_params():
        t = rename.get(name, prefix + name)
        try:
            info = container.info(t)
        except KeyError:
            missing.append(t if t == name else "%s (tensor %s)" % (name, t))
            continue
        used[t] = True  # a mismatched tensor is reported as mismatched, not also unexpected
        problem = p.mismatch(info) or (("name", "tensor is an AUX scales tensor") if info.aux else None)
        if problem:
            mismatched.append("%s: %s %s" % (name if t == name else "%s (tensor %s)" % (name, t),
                                             problem[0], problem[1]))
            continue
        plan.append((p, info.index))
    unexpected = []
    if prefix or len(used) != container.count():  # names decoded only when some may be left
        unexpected = [n for n in container.names() if n.startswith(prefix) and n not in used]
    if strict and (missing or unexpected or mismatched):
        parts = []
        for what, lst in (("missing", missing), ("unexpected", unexpected), ("mismatched", mismatched)):
            if lst:
                parts.append("%d %s: %s" % (len(lst), what, ", ".join(lst)))
        e = ContainerError("load: " + "; ".join(parts), None, "load")
        e.missing, e.unexpected, e.mismatched = missing, unexpected, mismatched
        raise e
    # all or nothing: every view made and every load mapper run before any param changes
    for p, _ in plan:
        p._wait("load()", False)
    staged = [(p, p._mapped(container._view(i))) for p, i in plan]
    for p, result in staged:
        p._commit(result)
    return {"bound": len(plan), "missing": missing, "unexpected": unexpected, "mismatched": mismatched}


def state(model):
    """[(name, state, where, nbytes)]: where the param's bytes live: 'flash' (a view into the
    container buffer: flash on a board with ROMFS/frozen containers), 'ram' (heap), or 'none'
    (not initialized yet; nbytes is what init will allocate)."""
    out = []
    for name, p in model.named_params():
        flash, ram, pending, _ = p.memory()
        if ram:
            out.append((name, p.state, "ram", ram))
        elif flash:
            out.append((name, p.state, "flash", flash))
        else:
            out.append((name, p.state, "none", pending))
    return out


def report(model, show=True):
    """Memory accounting per param and in total: bytes in flash views, in RAM (owned arrays,
    copy-on-write copies, unaligned-fallback copies, decoded f16), and not yet allocated.
    A View or array shared by clones is counted once in the totals. Prints a table when
    show is true; returns {'params': [{name, state, flash, ram, pending, note}], 'flash', 'ram',
    'pending'}, plus 'arena' and 'scratch' (bytes) for a graph model (mpy_lazy.model.Model),
    and, once mpy_lazy.kernels is imported, 'kernels' (the kernel path in use) and 'unavailable'
    (kernel paths that did not import on this board: name -> "ExceptionType: message")."""
    kernels = sys.modules.get("mpy_lazy.kernels")  # not imported by a runtime without it (core)
    rows, seen = [], {}
    total = {"flash": 0, "ram": 0, "pending": 0}
    for name, p in model.named_params():
        flash, ram, pending, note = p.memory()
        rows.append({"name": name, "state": p.state, "flash": flash, "ram": ram,
                     "pending": pending, "note": note})
        total["pending"] += pending
        if id(p._src) not in seen:  # a View or array shared by clones is counted once
            seen[id(p._src)] = True
            total["flash"] += flash
            total["ram"] += ram
    mem = model.memory() if hasattr(model, "memory") else None  # a graph model's arena
    if kernels:
        total["kernels"], total["unavailable"] = kernels.path(), dict(kernels.unavailable)
    if show:
        fmt = "%-28s %-6s %9s %9s %9s  %s"
        print(fmt % ("param", "state", "flash", "ram", "pending", "note"))
        for r in rows:
            print(fmt % (r["name"], r["state"], r["flash"], r["ram"], r["pending"], r["note"]))
        print(fmt % ("total", "", total["flash"], total["ram"], total["pending"], ""))
        if mem:
            print(fmt % ("arena (activations)", "", 0, mem["arena"], 0, "planned once, reused"))
            print(fmt % ("scratch (kernels)", "", 0, mem["scratch"], 0, "shared by the ops"))
        if kernels:
            print("kernels: %s" % total["kernels"])
            for name, why in sorted(total["unavailable"].items()):
                print("kernels: %s did not load: %s" % (name, why))
    if mem:
        total["arena"], total["scratch"] = mem["arena"], mem["scratch"]
    total["params"] = rows
    return total
