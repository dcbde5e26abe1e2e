# The rp2 port's default frozen modules, then the mpy_lazy runtime (repo root manifest.py).
include("$(PORT_DIR)/boards/manifest.py")
include("$(BOARD_DIR)/../../manifest.py")
