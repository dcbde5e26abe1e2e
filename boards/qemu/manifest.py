# Frozen into the qemu boards: the mpy_lazy runtime (the repository's manifest), nothing else.
include("../../manifest.py")
