# Freeze the mpy-lazy runtime into a firmware: in the board's manifest add
#   include("/path/to/mpy-lazy/manifest.py")
# or, on a core that is not ARM Thumb (ESP32's Xtensa, RISC-V), where mpy_lazy/_thumb.py's
# inline assembler cannot be compiled:
#   include("/path/to/mpy-lazy/manifest.py", thumb=False)
# Frozen, its bytecode and strings stay in flash: importing costs almost no heap.
import os

options.defaults(thumb=True)
metadata(description="mpy-lazy runtime: neural-network weights read in place from flash", version="0.2.0")
_files = sorted(
    os.path.relpath(os.path.join(d, f), "mpy_lazy")
    for d, _, names in os.walk("mpy_lazy")  # include() runs this manifest in its own directory
    for f in names
    if f.endswith(".py") and (options.thumb or f != "_thumb.py")
)
package("mpy_lazy", files=_files)
