# Frozen into the ESP32S3 qemu board: the mpy_lazy runtime without its ARM Thumb assembler
# kernels (Xtensa: the viper kernels, compiled by the xtensawin emitter, are the fast path).
include("$(BOARD_DIR)/../../../manifest.py", thumb=False)
