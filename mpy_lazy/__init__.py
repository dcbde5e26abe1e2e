# mpy-lazy runtime: neural-network weights read in place from a container (docs/FORMAT.md),
# lazy parameters, modules. Runs on MicroPython and CPython. API: docs/RUNTIME.md.
from .container import ContainerError, Container, Stream, View, TensorInfo
from .container import _map
from .param import Param
from .module import Module, load, state, report

__version__ = "0.2.0"


def open(src):
    """Container from a buffer, or from a path that can be mapped (a file on vfs.VfsRom; mmap
    on CPython). Any other path raises ContainerError pointing at Stream. A plain .safetensors
    file (byte 8 is '{') gives a mpy_lazy.safetensors.SafeTensors, read in place too."""
    if isinstance(src, str):
        src = _map(src)
    try:
        st = src[8] in (0x7B, b"{")  # '{' (a str path was mapped above)
    except (TypeError, ValueError, IndexError, NotImplementedError):
        st = False
    if st:  # imported only for one: heap is scarce
        from .safetensors import SafeTensors, looks_like

        if looks_like(src):
            return SafeTensors(src)
    return Container(src)
