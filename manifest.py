# Freeze the mpy-lazy runtime into a firmware: in the board's manifest add
#   include("/path/to/mpy-lazy/manifest.py")
# Frozen, its bytecode and strings stay in flash: importing costs almost no heap.
metadata(description="mpy-lazy runtime: neural-network weights read in place from flash", version="0.2.0")
package("mpy_lazy")
