"""A kernel path that does not load is never a silent fallback (issue 32 item 7): on a stock
RP2040 with the .py sources installed, compiling mpy_lazy/_viper.py on the board ran out of heap
and the int8 ops ran in plain Python, 1,000x slower, without a word. On the MicroPython unix
port, with the runtime imported from its .py sources: at a heap too small to compile _viper.py
(found by bisection, so wherever the paths put the runtime) importing mpy_lazy.kernels prints one
warning line naming the exception and what to do, and report() says the same; with room, the
import is silent and report() lists the paths this port lacks (thumb: no asm_thumb off ARM)."""
import ast

from conftest import run_micropython

CODE = """
import gc
import mpy_lazy
from mpy_lazy import kernels
gc.collect()
r = mpy_lazy.report(mpy_lazy.Module())
print("RESULT", repr((kernels.available(), r["kernels"], r["unavailable"])))
"""


def _import_at(heap):
    """('viper' | 'pure' | 'failed', the CompletedProcess) for importing at `heap` bytes."""
    r = run_micropython(CODE, heapsize=str(heap))
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode or not lines:
        assert "MemoryError" in r.stderr, r.stdout + r.stderr  # the import itself out of heap
        return "failed", r, None
    result = ast.literal_eval(lines[0][7:])
    return ("viper" if "viper" in result[0] else "pure"), r, result


def test_viper_that_does_not_compile_is_reported():
    # the least heap (2 KB steps) where the viper kernels load from source ...
    lo, hi = 64 << 10, 4096 << 10
    assert _import_at(hi)[0] == "viper"
    while hi - lo > 2048:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _import_at(mid)[0] == "viper" else (mid, hi)
    # ... and just below it, the import finishes on plain Python (compiling _viper.py is the
    # import's largest allocation), saying so
    for heap in range(hi - 2048, hi - 32768, -2048):
        outcome, r, result = _import_at(heap)
        if outcome == "pure":
            break
    assert outcome == "pure", (hi, outcome, r.stdout + r.stderr)
    warnings = r.stderr.strip().splitlines()
    assert len(warnings) == 1, r.stderr
    why = "MemoryError: memory allocation failed, allocating "
    assert warnings[0].startswith("mpy_lazy: warning: viper kernels did not load (" + why), warnings
    assert warnings[0].endswith("running plain Python, far slower; too little heap to compile "
                                "mpy_lazy/_viper.py here: install the .mpy files (make mpy) or freeze mpy_lazy")
    available, path, unavailable = result
    assert available == ["pure"] and path == "pure"
    assert list(unavailable) == ["viper"] and unavailable["viper"].startswith(why)
    assert "kernels: pure\n" in r.stdout and "kernels: viper did not load: " + why in r.stdout, r.stdout


def test_with_room_the_import_is_silent():
    r = run_micropython(CODE)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    available, path, unavailable = ast.literal_eval(r.stdout.split("RESULT ", 1)[1])
    assert available == ["viper", "pure"] and path == "viper"
    # the unix port (x86-64) has no inline Thumb assembler: thumb is listed, without a warning
    assert unavailable == {"thumb": "SyntaxError: invalid micropython decorator"}
    assert "kernels: thumb did not load: SyntaxError: invalid micropython decorator" in r.stdout


def test_a_port_without_the_native_emitter_says_so():
    # what kernels.py prints when compiling _viper.py raises the SyntaxError of a port built
    # without the native emitter (MICROPY_EMIT_NATIVE off), as on the unix port's minimal build
    code = ("from mpy_lazy import kernels\n"
            "kernels._unavailable('viper', SyntaxError('invalid micropython decorator'))\n")
    r = run_micropython(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.strip() == (
        "mpy_lazy: warning: viper kernels did not load (SyntaxError: invalid micropython decorator), "
        "running plain Python, far slower; this port has no native emitter"), r.stderr
