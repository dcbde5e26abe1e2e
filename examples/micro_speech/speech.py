# micro_speech on the board: 1 s of 16 kHz audio -> TFLM's audio front end (the signal library's
# ops: window, FFT, filter bank, noise reduction, PCAN, log) every 20 ms -> 49 x 40 int8 features
# -> the keyword model -> "silence", "unknown", "yes" or "no". Both models and the recordings (16-bit
# mono PCM .wav) in the ROMFS image (examples/micro_speech/README.md); on a board, the frames come
# from a microphone instead.
import array
import os

import mpy_lazy
from mpy_lazy import model

LABELS = ("silence", "unknown", "yes", "no")
STRIDE, WINDOW, FRAMES, FEATURES = 320, 480, 49, 40  # 20 ms steps of 30 ms windows, 16 kHz

frontend = model.from_container(mpy_lazy.open("/rom/frontend.mpyl"))  # 480 samples -> 40 features
kws = model.from_container(mpy_lazy.open("/rom/model.mpyl"))  # 49 x 40 features -> 4 scores
frame = array.array("h", bytes(2 * WINDOW))
features = kws.input  # the keyword model's int8 input, filled frame by frame
for name in sorted(os.listdir("/rom")):
    if not name.endswith(".wav"):
        continue
    f = open("/rom/" + name, "rb")
    f.seek(44)  # (the header of a 16-bit mono PCM .wav)
    pcm = array.array("h", f.read(2 * (STRIDE * (FRAMES - 1) + WINDOW)))
    f.close()
    frontend.reset()  # a new recording: the front end's noise estimate starts again
    for i in range(FRAMES):
        frame[:] = pcm[STRIDE * i:STRIDE * i + WINDOW]
        y = frontend(frame)
        for j in range(FEATURES):
            features[FEATURES * i + j] = y[j]
    scores = kws(features)
    best = max(range(len(LABELS)), key=lambda c: scores[c])
    print(name, LABELS[best], [scores[c] for c in range(len(LABELS))])
