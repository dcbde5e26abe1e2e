# Frozen into the qemu boards: the mpy_lazy runtime package from this repository.
package("mpy_lazy", base_path="../..")
