# The esp32 port's default frozen modules, then the mpy_lazy runtime (repo root manifest.py)
# without its ARM Thumb assembler kernels (Xtensa: the viper kernels are the fast path).
include("$(PORT_DIR)/boards/manifest.py")
include("$(BOARD_DIR)/../../manifest.py", thumb=False)
