# USER_C_MODULES of an ESP-IDF build with the component manager off (idf_build.sh): ulab, and the
# two packages MicroPython's ports/esp32/main/idf_component.yml would have the manager add to its
# main component, espressif__mdns and espressif__tinyusb (placed as local components by idf_tree.sh,
# found through COMPONENT_DIRS). Linking them into usermod gives main their headers.
include(${MPY_LAZY_ULAB_DIR}/code/micropython.cmake)
target_link_libraries(usermod INTERFACE idf::espressif__mdns idf::espressif__tinyusb)
