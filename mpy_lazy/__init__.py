# mpy-lazy runtime: neural-network weights read in place from a container (docs/FORMAT.md),
# lazy parameters, modules. Runs on MicroPython and CPython. API: docs/RUNTIME.md.
from .container import ContainerError, Container, Stream, View, TensorInfo
from .container import open_container as open
from .param import Param
from .module import Module, load, state, report

__version__ = "0.2.0"
