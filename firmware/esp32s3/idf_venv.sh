#!/bin/sh
# The Python environment ESP-IDF's tools run in (idf.py, kconfig, esptool, the component manager),
# a venv of its own from PyPI: IDF_PYTHON_ENV=/opt/esp-idf-venv firmware/esp32s3/idf_venv.sh
set -eu
IDF_PYTHON_ENV=${IDF_PYTHON_ENV:-/opt/esp-idf-venv}
python3 -m venv "$IDF_PYTHON_ENV"
"$IDF_PYTHON_ENV/bin/pip" install -r "$(dirname "$0")/idf-requirements.txt"
