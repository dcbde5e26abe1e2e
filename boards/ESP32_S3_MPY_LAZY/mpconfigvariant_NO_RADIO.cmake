# Variant NO_RADIO: the board without WiFi and Bluetooth, for ESP-IDF trees that lack Espressif's
# radio libraries (esp32-wifi-lib is a 2.3 GB repository: docs/FIRMWARE.md "ESP-IDF firmware").
# CONFIG_APP_NO_BLOBS links no binary library (WiFi, PHY, coexistence, BLE controller); the
# Python modules that need them (network.WLAN, espnow, bluetooth) are left out.
list(REMOVE_ITEM SDKCONFIG_DEFAULTS boards/sdkconfig.ble)
list(APPEND SDKCONFIG_DEFAULTS ${MICROPY_BOARD_DIR}/sdkconfig.no_radio)

list(APPEND MICROPY_DEF_BOARD
    MICROPY_PY_NETWORK_WLAN=0
    MICROPY_PY_ESPNOW=0
    MICROPY_PY_BLUETOOTH=0
)
