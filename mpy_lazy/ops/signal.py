# signal: TensorFlow Lite Micro's signal library (signal/micro/kernels, signal/src), the ops of
# micro_speech's audio front end, integer arithmetic bit for bit:
#
#   window     y = clamp16((x * w) >> shift), the window w repeated over x
#   fftbits    y[0] = scale bits of FftAutoScale (16 - msb(max |x|) - 1, at least 0)
#   fftscale   y = x * 2**s (x=data,bits), FftAutoScale's scaled data
#   rfft       the real FFT of each frame of x (int16, zero-padded to the FFT length), kiss_fft's
#              16-bit fixed point (kiss_fftr): complex int16 (re, im) pairs
#   energy     y[i] = re[i]**2 + im[i]**2 (uint32) for start <= i < end, 0 elsewhere
#   filterbank the mel filter bank's channels (uint64 sums of weights x energy; stored as
#              lo, hi uint32 words, read only by fbsqrt)
#   fbsqrt     y = Sqrt64(x) >> bits (x=sums,bits)
#   specsub    spectral subtraction: y = [out, noise estimate] (uint32); the noise estimate is
#              state kept across calls (TFLM's persistent buffer; reset() zeroes it)
#   pcan       per-channel amplitude normalization (x=signal,noise; t= the gain table)
#   fblog      y = min(Log32(x << c, scale), 32767) (int16; 0 where x << c <= 1)
#   delay      each row (x's last axis) delayed by D samples: the state holds each row's last D
#              samples (zeros at the start and on reset()), as TFLM's circular buffers
#   stacker    frames of C samples (x: one frame per call) stacked left+right+1 at a time, then
#              advanced by step frames; y = the stack then the valid flag (0: not yet full). The
#              first frame counts left+1 times; the frames held are state (reset() clears them)
#   framer     each row (x's last axis, N x step samples) cut into N frames of size samples,
#              advancing by step; y = the frames then the valid flag (0: some frame not yet
#              full, left as it was). Each row's samples not yet framed are state (prefill:
#              size - step zeros at the start and on reset())
#   overlap    each row of frames (x's last two axes, N x size, i16 or f32) added up overlapping
#              by step: y (flat) = the N x step samples done per row; the rest of the sums are state (zero at
#              the start and on reset()); i16 sums saturate
#   irfft      kiss_fftri (int16) of each frame of NFFT/2 + 1 complex values: NFFT reals
#
# uint32 values live in i32 values of the graph (the same bits). Options (opts=) per op, in
# this order: window shift; rfft fft_length; energy start,end; filterbank channels,weights;
# specsub smoothing,one_minus_smoothing,alternate_smoothing,alternate_one_minus_smoothing,
# min_signal_remaining,smoothing_bits,spectral_subtraction_bits,clamping; pcan snr_shift;
# fblog correction_bits,output_scale; delay delay_length; stacker left,right,step;
# framer size,step,prefill; overlap step,frames (a row),size; irfft fft_length.
from .._arith import micropython, slot_view
from ..kinds import (FOVERLAP, SDELAY, SFFT, SIRFFT, SENERGY, SFBANK, SFBLOG, SFBSQRT, SFFTBITS, SFFTSCALE, SFRAMER,
                     SOVERLAP, SPCAN, SRFFT, SSPECSUB, SSTACKER, SWINDOW)
from . import Op as Base

MAX_FFT = 1 << 15
_OPTS = {"window": 1, "fftbits": 0, "fftscale": 0, "rfft": 1, "energy": 2, "filterbank": 2, "fbsqrt": 0,
         "specsub": 8, "pcan": 1, "fblog": 2, "delay": 1,
         "stacker": 3, "framer": 3,
         "overlap": 3, "irfft": 1}
_I16_IN = ("window", "fftbits", "fftscale", "rfft", "energy", "delay", "stacker", "framer", "overlap", "irfft")


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        o = tuple(kv.get("opts", ()))
        if len(o) != _OPTS[name]:
            raise self.fail("needs opts= %d integers" % _OPTS[name], "opts")
        for i in o:
            if not 0 <= i <= 0x7FFFFFFF:
                raise self.fail("opts=%s: each 0..2147483647" % (o,), "opts")
        self.o = o
        if tuple(kv.get("q", (1.0, 0))) != (1.0, 0):
            raise self.fail("q=1.0,0 (integer values)", "q")
        want = 2 if name in ("fftscale", "fbsqrt", "pcan") else 1
        if len(ins) != want:
            raise self.fail("takes %d input values" % want, "x")
        x = ins[0]
        xdt = "i16" if name in _I16_IN else "i32"
        if name == "overlap" and x.dtype == "f32" or name in ("rfft", "irfft") and x.dtype in ("i32", "f32"):
            xdt = x.dtype
        for v in ins:
            if v.dtype != (xdt if v is x else "i32"):
                raise self.fail("input %s is %s: takes %s" % (v.name, v.dtype, xdt if v is x else "i32"), "x")
        if name in ("fftscale", "fbsqrt") and ins[1].size != 1:
            raise self.fail("its second input is the one scale-bits value", "x")
        shape, dt = x.shape, "i32"  # (elementwise ops keep x's shape)
        if name == "window":
            if not o[0] <= 31:
                raise self.fail("shift %d: 0..31" % o[0], "opts")
            wn = kv.get("shape", (x.size,))
            if len(wn) != 1 or x.size % wn[0]:
                raise self.fail("window of %s values over %d" % (wn, x.size), "shape")
            self.param("weight", "w", tuple(wn), "i16", init)
            dt = "i16"
        elif name in ("fftbits",):
            shape = (1,)
        elif name == "fftscale":
            dt = "i16"
        elif name == "rfft":
            nfft = o[0]
            if not 4 <= nfft <= MAX_FFT or nfft & (nfft - 1):
                raise self.fail("fft_length %d: a power of two 4..%d" % (nfft, MAX_FFT), "opts")
            frame = x.shape[-1]
            if frame > nfft:
                raise self.fail("frames of %d values: more than fft_length %d" % (frame, nfft), "x")
            self.frames = x.size // frame
            shape, dt = x.shape[:-1] + (nfft + 2,), xdt
            self.param("table", "t", (3 * nfft // 2,), xdt, init)
            self.scratch = nfft + 3 * nfft // 4 if xdt == "i16" else 2 * nfft
        elif name == "energy":
            if x.size % 2 or not o[0] <= o[1] <= x.size // 2:
                raise self.fail("start %d, end %d over %d complex values" % (o[0], o[1], x.size // 2), "opts")
            shape = (x.size // 2,)
        elif name == "filterbank":
            ch, nw = o
            if not 1 <= ch <= 65535 or not 1 <= nw <= 65535:
                raise self.fail("%d channels, %d weights" % (ch, nw), "opts")
            self.param("weight", "w", (2 * nw + 3 * (ch + 1),), "i16", init)
            shape = (2 * ch,)
        elif name == "fbsqrt":
            if x.size % 2:
                raise self.fail("takes lo,hi word pairs (filterbank's output)", "x")
            shape = (x.size // 2,)
        elif name == "specsub":
            if o[5] > 31 or o[6] > 31 or o[7] > 1:
                raise self.fail("smoothing_bits, spectral_subtraction_bits 0..31, clamping 0..1", "opts")
            shape = (2 * x.size,)
            self.persist = 4 * x.size
        elif name == "pcan":
            if ins[1].size != x.size or o[0] > 63:
                raise self.fail("signal and noise of one size, snr_shift 0..63", "x")
            wn = kv.get("shape", (125,))
            self.param("table", "t", tuple(wn), "i16", init)
            self.lut = wn[0]
        elif name == "fblog":
            if o[0] > 31:
                raise self.fail("correction_bits %d: 0..31" % o[0], "opts")
            dt = "i16"
        elif name == "delay":
            if o[0] > 65535:
                raise self.fail("delay_length %d: 0..65535" % o[0], "opts")
            dt = "i16"
            self.persist = max(4, (2 * o[0] * (x.size // x.shape[-1]) + 3) // 4 * 4)  # (0: a place all the same)
        elif name == "stacker":
            frames = o[0] + o[1] + 1
            if len(x.shape) != 1 or not 1 <= o[2] <= frames or frames > 32767 or frames * x.size > 1 << 24:
                raise self.fail("left %d, right %d, step %d over frames of %s: a frame (one axis), "
                                "1 <= step <= left + right + 1 <= 32767" % (o + (x.shape,)), "opts")
            shape, dt = (frames * x.size + 1,), "i16"
            self.persist = (2 * (frames * x.size + 2) + 3) // 4 * 4
        elif name == "framer":
            size, step, prefill = o
            row = x.shape[-1]
            if not 1 <= step <= row or row % step or size < 1 or size + step > 32767 or prefill > 1 or \
                    prefill and size < step:
                raise self.fail("frame_size %d, frame_step %d, prefill %d over rows of %d: steps dividing the "
                                "row, size + step <= 32767 (a prefill: step <= size)" % (size, step, prefill, row),
                                "opts")
            rows = x.size // row
            shape, dt = (rows * (row // step) * size + 1,), "i16"
            self.persist = (2 * rows * (size + step + 1) + 3) // 4 * 4
        elif name == "irfft":
            nfft = o[0]
            if not 4 <= nfft <= MAX_FFT or nfft & (nfft - 1) or x.size % (nfft + 2):
                raise self.fail("fft_length %d over %d values: a power of two 4..%d, frames of fft_length + 2"
                                % (nfft, x.size, MAX_FFT), "opts")
            self.frames = x.size // (nfft + 2)
            shape, dt = (self.frames * nfft,), xdt
            self.param("table", "t", (3 * nfft // 2,), xdt, init)
            self.scratch = 5 * nfft // 4 if xdt == "i16" else nfft
        elif name == "overlap":
            step, frames, size = o
            if not 1 <= step <= size or frames < 1 or x.size % (frames * size):
                raise self.fail("%d values in frames of %d, %d a row, frame_step %d: 1 <= step <= frame "
                                "size" % (x.size, size, frames, step), "opts")
            shape, dt = (x.size // size * step,), xdt
            self.persist = ((4 if dt == "f32" else 2) * x.size // frames + 3) // 4 * 4
        self.out = (shape, dt, None if dt == "f32" else (1.0, 0))

    def records(self, c):
        x, y, o, name = self.x[0], self.y, self.o, self.name
        xo, yo = c.off(x), c.off(y)
        if name == "window":
            return [c.record(SWINDOW, [xo, yo, x.size, self.weight.shape[0], o[0]] + c.ref(self.weight))]
        if name == "fftbits":
            return [c.record(SFFTBITS, [xo, yo, x.size])]
        if name == "fftscale":
            return [c.record(SFFTSCALE, [xo, c.off(self.x[1]), yo, x.size])]
        if name in ("rfft", "irfft") and x.dtype != "i16":
            return [c.record(SFFT, [xo, yo, x.shape[-1] if name == "rfft" else o[0] + 2, o[0], self.frames, c.scratch,
                                    7 if x.dtype == "i32" else 1, name == "irfft"] + c.ref(self.table))]
        if name == "rfft":
            return [c.record(SRFFT, [xo, yo, x.shape[-1], o[0], self.frames, c.scratch] + c.ref(self.table))]
        if name == "energy":
            return [c.record(SENERGY, [xo, yo, o[0], o[1], y.size])]
        if name == "filterbank":
            return [c.record(SFBANK, [xo, yo, o[0], x.size, o[1]] + c.ref(self.weight))]
        if name == "fbsqrt":
            return [c.record(SFBSQRT, [xo, c.off(self.x[1]), yo, y.size])]
        if name == "specsub":
            return [c.record(SSPECSUB, [xo, yo, x.size, c.state] + list(o))]
        if name == "pcan":
            return [c.record(SPCAN, [xo, c.off(self.x[1]), yo, x.size, o[0], self.lut] + c.ref(self.table))]
        if name == "delay":
            return [c.record(SDELAY, [xo, yo, x.shape[-1], x.size // x.shape[-1], o[0], c.state])]
        if name == "stacker":
            return [c.record(SSTACKER, [xo, yo, x.size] + list(o) + [c.state])]
        if name == "irfft":
            return [c.record(SIRFFT, [xo, yo, o[0], self.frames, c.scratch] + c.ref(self.table))]
        if name == "overlap":
            return [c.record(SOVERLAP if x.dtype == "i16" else FOVERLAP,
                             [xo, yo, x.size // (o[1] * o[2]), o[1], o[2], o[0], c.state])]
        if name == "framer":
            return [c.record(SFRAMER, [xo, yo, x.size // x.shape[-1], x.shape[-1] // o[1]] + list(o) + [c.state])]
        return [c.record(SFBLOG, [xo, yo, x.size, o[0], o[1]])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

FAST = "_viper_signal"  # (rfft and energy there; the other kinds run their native reference kernels)
KERNELS = {SWINDOW: "window", SFFTBITS: "fftbits", SFFTSCALE: "fftscale", SRFFT: "rfft", SENERGY: "energy",
           SFBANK: "filterbank", SFBSQRT: "fbsqrt", SSPECSUB: "specsub", SPCAN: "pcan", SFBLOG: "fblog",
           SDELAY: "delay",
           SSTACKER: "stacker",
           SFRAMER: "framer",
           SOVERLAP: "overlap", FOVERLAP: "foverlap",
           SIRFFT: "irfft",
           SFFT: "fft"}


def check(r, E):
    kind = r.kind
    if kind == SWINDOW:
        n, wn = r.range(4, "x", 1, 1 << 24), r.range(5, "w", 1, 1 << 24)
        if n % wn:
            r.fail("w", "a window of %d values over %d" % (wn, n))
        r.range(6, "shift", 0, 31)
        r.region(2, "x", 2 * n, 2)
        r.region(3, "y", 2 * n, 2)
        r.inplace = 2
        r.tensor(7, "w", ("i16",), 2 * wn)
    elif kind == SFFTBITS:
        n = r.range(4, "x", 1, 1 << 24)
        r.region(2, "x", 2 * n, 2)
        r.region(3, "y", 4, 4)
    elif kind == SFFTSCALE:
        n = r.range(5, "x", 1, 1 << 24)
        r.region(2, "x", 2 * n, 2)
        r.region(3, "x", 4, 4)
        r.region(4, "y", 2 * n, 2)
        r.inplace = 2
    elif kind == SRFFT:
        frame, nfft = r.range(4, "x", 1, MAX_FFT), r.range(5, "fft_length", 4, MAX_FFT)
        if nfft & (nfft - 1) or frame > nfft:
            r.fail("fft_length", "%d: a power of two, at least the frame (%d)" % (nfft, frame))
        frames = r.range(6, "x", 1, (1 << 24) // nfft)
        r.region(2, "x", 2 * frame * frames, 2)
        r.region(3, "y", 2 * (nfft + 2) * frames, 2)
        r.region(7, "scratch", 7 * nfft, 4)
        r.tensor(8, "table", ("i16",), 3 * nfft)
    elif kind == SFFT:
        frame, nfft = r.range(4, "x", 1, MAX_FFT + 2), r.range(5, "fft_length", 4, MAX_FFT)
        inv = r.range(9, "inverse", 0, 1)
        if nfft & (nfft - 1) or frame > nfft + 2 * inv or inv and frame != nfft + 2:
            r.fail("fft_length", "%d: a power of two, frames of at most it (rfft) or of it + 2 (irfft): %d"
                   % (nfft, frame))
        frames = r.range(6, "x", 1, (1 << 24) // nfft)
        dt = r[8]
        if dt not in (1, 7):
            r.fail("dtype", "code %d (1 f32, 7 i32)" % dt)
        r.region(2, "x", 4 * frame * frames, 4)
        r.region(3, "y", 4 * (nfft + 2 - 2 * inv) * frames, 4)
        r.region(7, "scratch", 4 * nfft * (2 - inv), 4)
        r.tensor(10, "table", ("f32" if dt == 1 else "i32",), 6 * nfft)
    elif kind == SENERGY:
        n = r.range(6, "y", 1, 1 << 24)
        end = r.range(5, "end", 0, n)
        r.range(4, "start", 0, end)
        r.region(2, "x", 4 * n, 2)
        r.region(3, "y", 4 * n, 4)
    elif kind == SFBANK:
        ch, nin, nw = r.range(4, "channels", 1, 65535), r.range(5, "x", 1, 1 << 24), r.range(6, "w", 1, 65535)
        r.region(2, "x", 4 * nin, 4)
        r.region(3, "y", 8 * ch, 4)
        r.tensor(7, "w", ("i16",), 2 * (2 * nw + 3 * (ch + 1)))
        t = E.halfs(r[7], r[8], 2 * nw + 3 * (ch + 1))
        for i in range(ch + 1):  # every channel's bins and weights inside the input and the table
            f, s, width = t[2 * nw + i], t[2 * nw + ch + 1 + i], t[2 * nw + 2 * (ch + 1) + i]
            if f < 0 or s < 0 or width < 0 or f + width > nin or s + width > nw:
                r.fail("w", "channel %d: bins %d+%d of %d, weights %d+%d of %d" % (i, f, width, nin, s, width, nw))
    elif kind == SFBSQRT:
        n = r.range(5, "y", 1, 1 << 24)
        r.region(2, "x", 8 * n, 4)
        r.region(3, "x", 4, 4)
        r.region(4, "y", 4 * n, 4)
    elif kind == SSPECSUB:
        n = r.range(4, "x", 1, 1 << 24)
        r.region(2, "x", 4 * n, 4)
        r.region(3, "y", 8 * n, 4)
        r.region(5, "state", 4 * n, 4)
        r.range(11, "smoothing_bits", 0, 31)
        r.range(12, "spectral_subtraction_bits", 0, 31)
        r.range(13, "clamping", 0, 1)
        for i in range(6, 11):
            r.range(i, "opts", 0, 0x7FFFFFFF)
    elif kind == SPCAN:
        n, lut = r.range(5, "x", 1, 1 << 24), r.range(7, "table", 3, 1 << 16)
        r.range(6, "snr_shift", 0, 63)
        r.region(2, "x", 4 * n, 4)
        r.region(3, "x", 4 * n, 4)
        r.region(4, "y", 4 * n, 4)
        r.inplace = 2
        r.tensor(8, "table", ("i16",), 2 * lut)
        if lut < 4 * 32 - 6 + 3:  # WideDynamicFunction reads lut[4 * msb(x) - 6 + 2], msb up to 32
            r.fail("table", "%d entries: the gain table needs %d" % (lut, 4 * 32 - 3))
    elif kind == SDELAY:
        f, rows, d = r.range(4, "x", 1, 65535), r.range(5, "x", 1, 1 << 24), r.range(6, "delay_length", 0, 65535)
        if f * rows > 1 << 24 or d * rows > 1 << 24:
            r.fail("x", "%d rows of %d samples, delayed by %d: too large" % (rows, f, d))
        r.region(2, "x", 2 * f * rows, 2)
        r.region(3, "y", 2 * f * rows, 2)
        r.region(7, "state", 2 * d * rows, 2)
    elif kind == SSTACKER:
        c, left, right = r.range(4, "x", 1, 1 << 24), r.range(5, "left", 0, 32766), r.range(6, "right", 0, 32766)
        frames = left + right + 1
        r.range(7, "step", 1, frames)
        if frames * c > 1 << 24 or frames > 32767:  # (the count of frames held is an i16)
            r.fail("x", "%d frames of %d samples: too large" % (frames, c))
        r.region(2, "x", 2 * c, 2)
        r.region(3, "y", 2 * (frames * c + 1), 2)
        r.region(8, "state", 2 * (frames * c + 2), 2)
    elif kind == SFRAMER:
        rows, frames = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
        size, step = r.range(6, "frame_size", 1, 32766), r.range(7, "frame_step", 1, 32766)
        if size + step > 32767:
            r.fail("frame_size", "frames of %d advancing by %d: size + step up to 32767" % (size, step))
        if r.range(8, "prefill", 0, 1) and size < step:
            r.fail("prefill", "frames of %d advancing by %d" % (size, step))
        if rows * frames * (size + step) > 1 << 24:
            r.fail("x", "%d rows of %d frames of %d: too large" % (rows, frames, size))
        r.region(2, "x", 2 * rows * frames * step, 2)
        r.region(3, "y", 2 * (rows * frames * size + 1), 2)
        r.region(9, "state", 2 * rows * (size + step + 1), 2)
    elif kind == SIRFFT:
        nfft = r.range(4, "fft_length", 4, MAX_FFT)
        if nfft & (nfft - 1):
            r.fail("fft_length", "%d: a power of two" % nfft)
        frames = r.range(5, "x", 1, (1 << 24) // nfft)
        r.region(2, "x", 2 * (nfft + 2) * frames, 2)
        r.region(3, "y", 2 * nfft * frames, 2)
        r.region(6, "scratch", 5 * nfft, 4)
        r.tensor(7, "table", ("i16",), 3 * nfft)
    elif kind in (SOVERLAP, FOVERLAP):
        es = 2 if kind == SOVERLAP else 4
        rows, frames = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
        size = r.range(6, "x", 1, 1 << 24)
        step = r.range(7, "frame_step", 1, size)
        if rows * frames * size > 1 << 24:
            r.fail("x", "%d rows of %d frames of %d: too large" % (rows, frames, size))
        r.region(2, "x", es * rows * frames * size, es)
        r.region(3, "y", es * rows * frames * step, es)
        r.region(8, "state", es * rows * size, es)
    elif kind == SFBLOG:
        n = r.range(4, "x", 1, 1 << 24)
        r.range(5, "correction_bits", 0, 31)
        r.range(6, "output_scale", 0, 0x7FFFFFFF)
        r.region(2, "x", 4 * n, 4)
        r.region(3, "y", 2 * n, 2)


def state(P, k):
    """specsub's noise estimate and delay's samples, kept across calls (zero at the start, as
    TFLM's Reset)."""
    if P[k] & 255 == SSPECSUB:
        return ((P[k + 5], P[k + 4], 0, 4),)
    if P[k] & 255 == SDELAY:
        return ((P[k + 7], P[k + 5] * P[k + 6], 0, 2),)
    if P[k] & 255 == SSTACKER:
        return ((P[k + 8], P[k + 4] * (P[k + 5] + P[k + 6] + 1) + 2, 0, 2),)
    if P[k] & 255 in (SOVERLAP, FOVERLAP):
        return ((P[k + 8], P[k + 4] * P[k + 6], 0, 2 if P[k] & 255 == SOVERLAP else 4),)
    if P[k] & 255 == SFRAMER:
        return ((P[k + 9], P[k + 4] * (P[k + 6] + P[k + 7] + 1), 0, 2),)
    return ()


@micropython.native
def _s32(v):
    """A uint32 (0..2**32-1) as the int32 word holding its bits."""
    return v - 0x100000000 if v > 0x7FFFFFFF else v


@micropython.native
def _w16(v):
    """The low 16 bits of v as an int16 (C's store to an int16_t)."""
    v &= 0xFFFF
    return v - 0x10000 if v > 0x7FFF else v


@micropython.native
def msb(x):
    """signal/src/msb_32.cc's MostSignificantBit32 as the GCC build has it (32 for 0); any
    width (MostSignificantBit64 for nonzero x)."""
    if not x:
        return 32
    n = 0
    while x:
        x >>= 1
        n += 1
    return n


# window record: 2 XO 3 YO 4 N 5 WN (window length; N a multiple) 6 SHIFT 7 8 w [WN] i16

@micropython.native
def window(E, P, k):
    a, w = E.view(2), E.s8[P[k + 7]]  # (int16 tensors read as byte pairs: views made once, no heap)
    xo = P[k + 2] // 2
    yo = P[k + 3] // 2
    n = P[k + 4]
    wn = P[k + 5]
    sh = P[k + 6]
    w0 = P[k + 8]
    j = 0
    for i in range(n):
        v = (a[xo + i] * (w[w0 + 2 * j] & 255 | w[w0 + 2 * j + 1] << 8)) >> sh
        a[yo + i] = -32768 if v < -32768 else 32767 if v > 32767 else v
        j += 1
        if j == wn:
            j = 0


# fftbits record: 2 XO 3 YO (one int32) 4 N. fftscale record: 2 XO 3 SO (the bits) 4 YO 5 N

@micropython.native
def fftbits(E, P, k):
    a = E.view(2)
    xo, n = P[k + 2] // 2, P[k + 4]
    top = 0
    for i in range(n):  # MaxAbs16: an int16, so |-32768| wraps to -32768 (and stays below what follows)
        v = a[xo + i]
        if v > top:
            top = v
        elif -v > top:
            top = _w16(-v)
    bits = 16 - msb(top & 0xFFFFFFFF) - 1
    y = E.view(4)
    y[P[k + 3] // 4] = bits if bits > 0 else 0


@micropython.native
def fftscale(E, P, k):
    a = E.view(2)
    xo = P[k + 2] // 2
    s = E.view(4)[P[k + 3] // 4] & 31  # (fftbits' 0..15; any word: no huge shift)
    yo = P[k + 4] // 2
    n = P[k + 5]
    for i in range(n):
        a[yo + i] = _w16(a[xo + i] << s)


# rfft record: 2 XO 3 YO 4 FRAME (values per frame) 5 NFFT 6 FRAMES 7 SCRATCH (7 NFFT / 4 int32:
# the zero-padded frame, kiss_fftr's buffer of NFFT/2 complex, the table's copy, all int16)
# 8 9 t [3 NFFT / 2] i16: kiss_fft's
# twiddles of the NFFT/2-point complex FFT (re, im pairs), then kiss_fftr's NFFT/4 super twiddles,
# floor(0.5 + 32767 cos|sin(phase)) computed at pack time in double precision as kiss_fft does.
# y: NFFT/2 + 1 complex int16 per frame.

@micropython.native
def rfft(E, P, k):
    a, t = E.view(2), E.s8[P[k + 8]]
    xo = P[k + 2] // 2
    yo = P[k + 3] // 2
    frame = P[k + 4]
    nfft = P[k + 5]
    frames = P[k + 6]
    so = P[k + 7] // 2
    t0 = P[k + 9]
    buf, tw = so + nfft, so + 2 * nfft
    for i in range(3 * nfft // 2):  # the table into the scratch (int16 reads of the arena)
        a[tw + i] = t[t0 + 2 * i] & 255 | t[t0 + 2 * i + 1] << 8
    for f in range(frames):
        for i in range(frame):
            a[so + i] = a[xo + f * frame + i]
        for i in range(frame, nfft):
            a[so + i] = 0
        kiss_fftr(a, so, a, buf, a, yo + f * (nfft + 2), a, tw, nfft)


@micropython.native
def kiss_fftr(x, x0, w, w0, y, y0, t, t0, nfft):
    """kiss_fftr (FIXED_POINT 16) of nfft int16 reals x[x0:] into nfft/2 + 1 complex y[y0:],
    with the nfft/2-point complex FFT in w[w0:] (kiss_fft's tmpbuf): every store an int16."""
    n = nfft // 2
    _work(w, w0, x, x0, 1, n, t, t0, 0)
    s0 = t0 + 2 * n  # the super twiddles
    tr, ti = _div(w[w0], 16383), _div(w[w0 + 1], 16383)
    y[y0], y[y0 + 1] = _w16(tr + ti), 0
    y[y0 + 2 * n], y[y0 + 2 * n + 1] = _w16(tr - ti), 0
    for j in range(1, n // 2 + 1):
        pr, pi = _div(w[w0 + 2 * j], 16383), _div(w[w0 + 2 * j + 1], 16383)
        qr, qi = _div(w[w0 + 2 * (n - j)], 16383), _div(_w16(-w[w0 + 2 * (n - j) + 1]), 16383)
        f1r = _w16(pr + qr)
        f1i = _w16(pi + qi)
        f2r = _w16(pr - qr)
        f2i = _w16(pi - qi)
        cr, ci = t[s0 + 2 * (j - 1)], t[s0 + 2 * (j - 1) + 1]
        twr = _w16((f2r * cr - f2i * ci + 16384) >> 15)
        twi = _w16((f2r * ci + f2i * cr + 16384) >> 15)
        y[y0 + 2 * j], y[y0 + 2 * j + 1] = _w16((f1r + twr) >> 1), _w16((f1i + twi) >> 1)
        y[y0 + 2 * (n - j)], y[y0 + 2 * (n - j) + 1] = _w16((f1r - twr) >> 1), _w16((twi - f1i) >> 1)


@micropython.native
def _div(v, m):
    """kiss_fft's DIVSCALAR: v * (SAMP_MAX / k), rounded, as an int16 (m = 32767 // k)."""
    return _w16((v * m + 16384) >> 15)


@micropython.native
def _work(o, o0, f, f0, stride, n, t, t0, inv):
    """kiss_fft's kf_work: the n-point complex FFT of f[f0::stride] (int16 pairs) into o[o0:],
    radix 4 while n is a multiple of 4, then radix 2 (kf_factor's order for a power of two);
    twiddles t[t0 + 2 * j * stride] of the full-size FFT; inv: the inverse FFT's radix-4 turn
    (its twiddles are the inverse ones)."""
    p = 4 if n % 4 == 0 else 2
    m = n // p
    if m == 1:
        for j in range(p):
            o[o0 + 2 * j], o[o0 + 2 * j + 1] = f[f0 + 2 * j * stride], f[f0 + 2 * j * stride + 1]
    else:
        for j in range(p):
            _work(o, o0 + 2 * j * m, f, f0 + 2 * j * stride, stride * p, m, t, t0, inv)
    if p == 2:
        for j in range(m):
            a, b = o0 + 2 * j, o0 + 2 * (j + m)
            ar, ai = _div(o[a], 16383), _div(o[a + 1], 16383)
            br, bi = _div(o[b], 16383), _div(o[b + 1], 16383)
            cr, ci = t[t0 + 2 * j * stride], t[t0 + 2 * j * stride + 1]
            sr = _w16((br * cr - bi * ci + 16384) >> 15)
            si = _w16((br * ci + bi * cr + 16384) >> 15)
            o[b], o[b + 1] = _w16(ar - sr), _w16(ai - si)
            o[a], o[a + 1] = _w16(ar + sr), _w16(ai + si)
        return
    for j in range(m):
        i0 = o0 + 2 * j
        i1 = o0 + 2 * (j + m)
        i2 = o0 + 2 * (j + 2 * m)
        i3 = o0 + 2 * (j + 3 * m)
        f0r, f0i = _div(o[i0], 8191), _div(o[i0 + 1], 8191)
        f1r, f1i = _div(o[i1], 8191), _div(o[i1 + 1], 8191)
        f2r, f2i = _div(o[i2], 8191), _div(o[i2 + 1], 8191)
        f3r, f3i = _div(o[i3], 8191), _div(o[i3 + 1], 8191)
        c = t0 + 2 * j * stride
        s0r = _w16((f1r * t[c] - f1i * t[c + 1] + 16384) >> 15)
        s0i = _w16((f1r * t[c + 1] + f1i * t[c] + 16384) >> 15)
        c = t0 + 4 * j * stride
        s1r = _w16((f2r * t[c] - f2i * t[c + 1] + 16384) >> 15)
        s1i = _w16((f2r * t[c + 1] + f2i * t[c] + 16384) >> 15)
        c = t0 + 6 * j * stride
        s2r = _w16((f3r * t[c] - f3i * t[c + 1] + 16384) >> 15)
        s2i = _w16((f3r * t[c + 1] + f3i * t[c] + 16384) >> 15)
        s5r, s5i = _w16(f0r - s1r), _w16(f0i - s1i)
        f0r, f0i = _w16(f0r + s1r), _w16(f0i + s1i)
        s3r, s3i = _w16(s0r + s2r), _w16(s0i + s2i)
        s4r, s4i = _w16(s0r - s2r), _w16(s0i - s2i)
        o[i2], o[i2 + 1] = _w16(f0r - s3r), _w16(f0i - s3i)
        o[i0], o[i0 + 1] = _w16(f0r + s3r), _w16(f0i + s3i)
        if inv:
            o[i1], o[i1 + 1] = _w16(s5r - s4i), _w16(s5i + s4r)
            o[i3], o[i3 + 1] = _w16(s5r + s4i), _w16(s5i - s4r)
        else:
            o[i1], o[i1 + 1] = _w16(s5r + s4i), _w16(s5i - s4r)
            o[i3], o[i3 + 1] = _w16(s5r - s4i), _w16(s5i + s4r)


# fft record (rfft and irfft of int32 and float32): 2 XO 3 YO 4 FRAME (values per frame in) 5 NFFT
# 6 FRAMES 7 SCRATCH (rfft: 2 NFFT words, the zero-padded frame and kiss_fftr's buffer of NFFT/2
# complex; irfft: NFFT words, kiss_fftri's buffer) 8 DT (7 int32, 1 float32) 9 INV (0 rfft, 1
# irfft) 10 11 t [3 NFFT / 2] of DT: kiss_fft's twiddles (as the int16 rfft's, of SAMP_MAX
# 2**31 - 1 for int32, cos and sin as float32 for float32). kiss_fft's FIXED_POINT 32 (products in
# 64 bits, rounded: sround) or its float arithmetic (float32 stores; the sums in between in the
# port's float; the float irfft's output / NFFT, TFLM's IrfftFloatApply); plain Python: int32
# products are beyond a small int on a 32-bit board.

def fft(E, P, k):
    g = P[k + 8] == 7
    a = E.view(4) if g else E.af
    t = slot_view(E.B[P[k + 10]], "i32" if g else "f32")  # (made per call: these allocate anyway)
    t0 = P[k + 11] // 4
    xo, yo, so = P[k + 2] // 4, P[k + 3] // 4, P[k + 7] // 4
    frame, nfft, frames = P[k + 4], P[k + 5], P[k + 6]
    n = nfft // 2
    for f in range(frames):
        if P[k + 9]:
            _fftri(a, xo + f * (nfft + 2), a, so, a, yo + f * nfft, t, t0, nfft, g)
            continue
        for i in range(frame):
            a[so + i] = a[xo + f * frame + i]
        for i in range(frame, nfft):
            a[so + i] = 0
        _work_g(a, so + nfft, a, so, 1, n, t, t0, 0, g)
        _fftr_post(a, so + nfft, a, yo + f * (nfft + 2), t, t0 + 2 * n, n, g)


def _w32(v):
    """The low 32 bits of v as an int32 (C's store to an int32_t)."""
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v > 0x7FFFFFFF else v


def _dv(v, m, g):
    """DIVSCALAR(v, k) (m = SAMP_MAX // k): int32 sround(v * m); float: v (C_FIXDIV does nothing)."""
    return _w32((v * m + 0x40000000) >> 31) if g else v


def _cm(a, b, c, d, g):
    """a b - c d: int32 sround of the 64-bit sum; float: the float's."""
    return _w32((a * b - c * d + 0x40000000) >> 31) if g else a * b - c * d


def _s(v, g):
    return _w32(v) if g else v


def _half(v, g):
    """HALF_OF: >> 1 (int32), * 0.5 (float)."""
    return _w32(v) >> 1 if g else v * 0.5


def _work_g(o, o0, f, f0, stride, n, t, t0, inv, g):
    """_work for int32 (g) or float values: kiss_fft's kf_work, radix 4 then radix 2."""
    p = 4 if n % 4 == 0 else 2
    m = n // p
    if m == 1:
        for j in range(p):
            o[o0 + 2 * j] = f[f0 + 2 * j * stride]
            o[o0 + 2 * j + 1] = f[f0 + 2 * j * stride + 1]
    else:
        for j in range(p):
            _work_g(o, o0 + 2 * j * m, f, f0 + 2 * j * stride, stride * p, m, t, t0, inv, g)
    h, q = 1073741823, 536870911  # SAMP_MAX / 2, / 4
    if p == 2:
        for j in range(m):
            a, b = o0 + 2 * j, o0 + 2 * (j + m)
            ar, ai = _dv(o[a], h, g), _dv(o[a + 1], h, g)
            br, bi = _dv(o[b], h, g), _dv(o[b + 1], h, g)
            cr, ci = t[t0 + 2 * j * stride], t[t0 + 2 * j * stride + 1]
            sr, si = _cm(br, cr, bi, ci, g), _cm(br, ci, -bi, cr, g)
            o[b], o[b + 1] = _s(ar - sr, g), _s(ai - si, g)
            o[a], o[a + 1] = _s(ar + sr, g), _s(ai + si, g)
        return
    for j in range(m):
        i0, i1, i2, i3 = o0 + 2 * j, o0 + 2 * (j + m), o0 + 2 * (j + 2 * m), o0 + 2 * (j + 3 * m)
        f0r, f0i = _dv(o[i0], q, g), _dv(o[i0 + 1], q, g)
        f1r, f1i = _dv(o[i1], q, g), _dv(o[i1 + 1], q, g)
        f2r, f2i = _dv(o[i2], q, g), _dv(o[i2 + 1], q, g)
        f3r, f3i = _dv(o[i3], q, g), _dv(o[i3 + 1], q, g)
        c = t0 + 2 * j * stride
        s0r, s0i = _cm(f1r, t[c], f1i, t[c + 1], g), _cm(f1r, t[c + 1], -f1i, t[c], g)
        c = t0 + 4 * j * stride
        s1r, s1i = _cm(f2r, t[c], f2i, t[c + 1], g), _cm(f2r, t[c + 1], -f2i, t[c], g)
        c = t0 + 6 * j * stride
        s2r, s2i = _cm(f3r, t[c], f3i, t[c + 1], g), _cm(f3r, t[c + 1], -f3i, t[c], g)
        s5r, s5i = _s(f0r - s1r, g), _s(f0i - s1i, g)
        f0r, f0i = _s(f0r + s1r, g), _s(f0i + s1i, g)
        s3r, s3i = _s(s0r + s2r, g), _s(s0i + s2i, g)
        s4r, s4i = _s(s0r - s2r, g), _s(s0i - s2i, g)
        o[i2], o[i2 + 1] = _s(f0r - s3r, g), _s(f0i - s3i, g)
        o[i0], o[i0 + 1] = _s(f0r + s3r, g), _s(f0i + s3i, g)
        if inv:
            o[i1], o[i1 + 1] = _s(s5r - s4i, g), _s(s5i + s4r, g)
            o[i3], o[i3 + 1] = _s(s5r + s4i, g), _s(s5i - s4r, g)
        else:
            o[i1], o[i1 + 1] = _s(s5r + s4i, g), _s(s5i - s4r, g)
            o[i3], o[i3 + 1] = _s(s5r - s4i, g), _s(s5i + s4r, g)


def _fftr_post(w, w0, y, y0, t, s0, n, g):
    """kiss_fftr's split of the n-point complex FFT w[w0:] into n + 1 complex y[y0:] (super
    twiddles t[s0:])."""
    h = 1073741823
    tr, ti = _dv(w[w0], h, g), _dv(w[w0 + 1], h, g)
    y[y0], y[y0 + 1] = _s(tr + ti, g), 0
    y[y0 + 2 * n], y[y0 + 2 * n + 1] = _s(tr - ti, g), 0
    for j in range(1, n // 2 + 1):
        pr, pi = _dv(w[w0 + 2 * j], h, g), _dv(w[w0 + 2 * j + 1], h, g)
        qr, qi = _dv(w[w0 + 2 * (n - j)], h, g), _dv(_s(-w[w0 + 2 * (n - j) + 1], g), h, g)
        f1r, f1i, f2r, f2i = _s(pr + qr, g), _s(pi + qi, g), _s(pr - qr, g), _s(pi - qi, g)
        cr, ci = t[s0 + 2 * (j - 1)], t[s0 + 2 * (j - 1) + 1]
        twr, twi = _cm(f2r, cr, f2i, ci, g), _cm(f2r, ci, -f2i, cr, g)
        y[y0 + 2 * j], y[y0 + 2 * j + 1] = _half(f1r + twr, g), _half(f1i + twi, g)
        y[y0 + 2 * (n - j)], y[y0 + 2 * (n - j) + 1] = _half(f1r - twr, g), _half(twi - f1i, g)


def _fftri(x, x0, w, w0, y, y0, t, t0, nfft, g):
    """kiss_fftri of nfft/2 + 1 complex x[x0:] into nfft reals y[y0:] (its buffer w[w0:])."""
    n, h = nfft // 2, 1073741823
    s0 = t0 + 2 * n
    w[w0] = _dv(_s(x[x0] + x[x0 + nfft], g), h, g)
    w[w0 + 1] = _dv(_s(x[x0] - x[x0 + nfft], g), h, g)
    for j in range(1, n // 2 + 1):
        fr, fi = _dv(x[x0 + 2 * j], h, g), _dv(x[x0 + 2 * j + 1], h, g)
        cr, ci = _dv(x[x0 + 2 * (n - j)], h, g), _dv(_s(-x[x0 + 2 * (n - j) + 1], g), h, g)
        er, ei, dr, di = _s(fr + cr, g), _s(fi + ci, g), _s(fr - cr, g), _s(fi - ci, g)
        wr, wi = t[s0 + 2 * (j - 1)], t[s0 + 2 * (j - 1) + 1]
        or_, oi = _cm(dr, wr, di, wi, g), _cm(dr, wi, -di, wr, g)
        w[w0 + 2 * j], w[w0 + 2 * j + 1] = _s(er + or_, g), _s(ei + oi, g)
        w[w0 + 2 * (n - j)], w[w0 + 2 * (n - j) + 1] = _s(er - or_, g), _s(-_s(ei - oi, g), g)
    _work_g(y, y0, w, w0, 1, n, t, t0, 1, g)
    if not g:  # (TFLM's float irfft divides kiss_fftri's output by fft_length)
        for i in range(y0, y0 + nfft):
            y[i] = y[i] / nfft


# energy record: 2 XO (complex int16) 3 YO (uint32) 4 START 5 END 6 N

@micropython.native
def energy(E, P, k):
    a, y = E.view(2), E.view(4)
    xo = P[k + 2] // 2
    yo = P[k + 3] // 4
    start = P[k + 4]
    end = P[k + 5]
    n = P[k + 6]
    for i in range(n):
        if start <= i < end:
            re, im = a[xo + 2 * i], a[xo + 2 * i + 1]
            y[yo + i] = _s32((re * re + im * im) & 0xFFFFFFFF)
        else:
            y[yo + i] = 0  # (TFLM leaves these bytes as they were; micro_speech zeroes them after)


# filterbank record: 2 XO (uint32 [NIN]) 3 YO (CH uint64 as lo, hi words) 4 CH 5 NIN 6 NW 7 8 w
# (i16: weights [NW], unweights [NW], then CH + 1 each of frequency starts, weight starts, widths)

@micropython.native
def _h(s, i):
    """The int16 at byte i of a signed byte view."""
    return s[i] & 255 | s[i + 1] << 8


@micropython.native
def filterbank(E, P, k):
    a, w = E.view(4), E.s8[P[k + 7]]
    xo = P[k + 2] // 4
    yo = P[k + 3] // 4
    ch = P[k + 4]
    nw = P[k + 6]
    w0 = P[k + 8]
    fs, ws, wd = w0 + 4 * nw, w0 + 4 * nw + 2 * (ch + 1), w0 + 4 * nw + 4 * (ch + 1)  # (bytes)
    acc = 0
    for i in range(ch + 1):
        un = 0
        f, s = _h(w, fs + 2 * i), w0 + 2 * _h(w, ws + 2 * i)
        for j in range(_h(w, wd + 2 * i)):
            v = a[xo + f + j] & 0xFFFFFFFF
            acc += _h(w, s + 2 * j) * v
            un += _h(w, s + 2 * (nw + j)) * v
        if i:  # (channel 0 of TFLM's work area is scratch)
            if acc < 0 or acc >> 64:  # (negative weights: uint64 wraparound, as TFLM's)
                acc &= 0xFFFFFFFFFFFFFFFF
            a[yo + 2 * (i - 1)] = _s32(acc & 0xFFFFFFFF)
            a[yo + 2 * (i - 1) + 1] = _s32(acc >> 32)
        acc = un


@micropython.native
def _root(num, bits, top):
    """The bitwise integer root of signal/src/square_root_32.cc (bits 32, top 0xFFFF: a uint16)
    and square_root_64.cc (64, 0xFFFFFFFF), rounded up where the remainder exceeds it (num > 0)."""
    res = 0
    m = (bits - msb(num)) | 1
    bit = 1 << (bits - 1 - m)
    for _ in range((bits - 1 - m) // 2 + 1):
        if num >= res + bit:
            num -= res + bit
            res = (res >> 1) + bit
        else:
            res >>= 1
        bit >>= 2
    if num > res and res != top:
        res += 1
    return res & top


@micropython.native
def sqrt64(num):
    """Sqrt64, with its shortcut: Sqrt32 below 2**32."""
    if num == 0:
        return 0
    if num >> 32 == 0:
        return _root(num, 32, 0xFFFF)
    return _root(num, 64, 0xFFFFFFFF)


# fbsqrt record: 2 XO (uint64 lo, hi words) 3 SO (the scale bits, int32) 4 YO (uint32) 5 N

@micropython.native
def fbsqrt(E, P, k):
    a = E.view(4)
    xo, yo, n = P[k + 2] // 4, P[k + 4] // 4, P[k + 5]
    s = a[P[k + 3] // 4] & 31  # (a uint32 shifted by an int: the shift is taken mod 32, as x86 does)
    for i in range(n):
        v = (a[xo + 2 * i] & 0xFFFFFFFF) | (a[xo + 2 * i + 1] & 0xFFFFFFFF) << 32
        a[yo + i] = _s32(sqrt64(v) >> s)


# specsub record: 2 XO (uint32 [N]) 3 YO ([2N]: the output, then the noise estimate) 4 N
# 5 STATE (the noise estimate, uint32 [N], kept across calls) 6 SMOOTHING 7 ONE_MINUS
# 8 ALT_SMOOTHING 9 ALT_ONE_MINUS 10 MIN_SIGNAL_REMAINING 11 SMOOTHING_BITS 12 SS_BITS 13 CLAMP

@micropython.native
def specsub(E, P, k):
    a = E.view(4)
    xo = P[k + 2] // 4
    yo = P[k + 3] // 4
    n = P[k + 4]
    so = P[k + 5] // 4
    sb = P[k + 11]
    ssb = P[k + 12]
    clamp = P[k + 13]
    floor_m = P[k + 10]
    for i in range(n):
        sm, om = P[k + 6], P[k + 7]
        if i & 1:  # (odd channels: the alternate smoothing)
            sm, om = P[k + 8], P[k + 9]
        x = a[xo + i] & 0xFFFFFFFF
        up = (x << sb) & 0xFFFFFFFF
        # (two products of uint32 and int32 < 2**64: the uint64 sum never wraps)
        est = ((up * sm + (a[so + i] & 0xFFFFFFFF) * om) >> ssb) & 0xFFFFFFFF
        a[so + i] = _s32(est)
        if est > up:
            est = up
            if clamp:
                a[so + i] = _s32(est)
        fl = ((x * floor_m) >> ssb) & 0xFFFFFFFF
        sub = (up - est) >> sb
        a[yo + i] = _s32(sub if sub > fl else fl)
        a[yo + n + i] = a[so + i]


# pcan record: 2 XO (uint32 [N]) 3 NO (the noise estimate, uint32 [N]) 4 YO 5 N 6 SNR_SHIFT
# 7 L (gain table entries) 8 9 t [L] i16: signal/src/pcan_argc_fixed.cc

@micropython.native
def pcan(E, P, k):
    a, lut = E.view(4), E.s8[P[k + 8]]
    xo = P[k + 2] // 4
    no = P[k + 3] // 4
    yo = P[k + 4] // 4
    n = P[k + 5]
    shift = P[k + 6]
    l0 = P[k + 9]
    for i in range(n):
        gain = _wide(a[no + i] & 0xFFFFFFFF, lut, l0) & 0xFFFFFFFF  # (an int16 made uint32)
        snr = (((a[xo + i] & 0xFFFFFFFF) * gain) >> shift) & 0xFFFFFFFF
        if snr < 2 << 12:  # PcanShrink: x*x/4 below 2, x - 1 above (12 fraction bits in, 6 out)
            v = ((snr * snr) & 0xFFFFFFFF) >> 20
        else:
            v = ((snr >> 6) - 64) & 0xFFFFFFFF
        a[yo + i] = _s32(v)


@micropython.native
def _wide(x, lut, l0):
    """WideDynamicFunction: the gain of noise estimate x from the piecewise table (int16)."""
    if x <= 2:
        return _h(lut, l0 + 2 * x)
    interval = msb(x)
    b = l0 + 2 * (4 * interval - 6)
    frac = _w16(((x << (11 - interval)) if interval < 11 else (x >> (interval - 11))) & 0xFFFFFFFF) & 0x3FF
    r = (_h(lut, b + 4) * frac) >> 5
    r += ((_h(lut, b + 2) & 0xFFFFFFFF) << 5) & 0xFFFFFFFF
    r = _s32(r & 0xFFFFFFFF)
    r = _s32((r * frac) & 0xFFFFFFFF)
    r = (r + (1 << 14)) >> 15
    r += _h(lut, b)
    return _w16(r)


# fblog record: 2 XO (uint32 [N]) 3 YO (int16) 4 N 5 CORRECTION_BITS 6 OUTPUT_SCALE

_LOG_LUT = (0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797, 2944, 3087,
            3224, 3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549, 4633, 4714, 4791, 4864,
            4934, 5001, 5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444, 5477, 5507, 5533, 5557, 5578, 5595,
            5610, 5622, 5631, 5637, 5640, 5641, 5638, 5633, 5626, 5615, 5602, 5586, 5568, 5547, 5524, 5498, 5470,
            5439, 5406, 5370, 5332, 5291, 5249, 5203, 5156, 5106, 5054, 5000, 4944, 4885, 4825, 4762, 4697, 4630,
            4561, 4490, 4416, 4341, 4264, 4184, 4103, 4020, 3935, 3848, 3759, 3668, 3575, 3481, 3384, 3286, 3186,
            3084, 2981, 2875, 2768, 2659, 2549, 2437, 2323, 2207, 2090, 1971, 1851, 1729, 1605, 1480, 1353, 1224,
            1094, 963, 830, 695, 559, 421, 282, 142, 0, 0)


@micropython.native
def log32(x, scale):
    """signal/src/log.cc's Log32 (x > 1)."""
    integer = msb(x) - 1
    frac = x - (1 << integer)  # (an int32 in TFLM: x < 2**32 keeps it in range after the shift)
    if integer < 16:
        frac <<= 16 - integer
    else:
        frac >>= integer - 16
    frac = _s32(frac & 0xFFFFFFFF)
    seg = (frac >> 9) & 0xFFFFFFFF
    c0, c1 = _LOG_LUT[seg], _LOG_LUT[seg + 1]
    rel = ((c1 - c0) * (frac - 512 * seg)) >> 16
    log2 = (((integer << 16) & 0xFFFFFFFF) + ((frac + c0 + rel) & 0xFFFFFFFF)) & 0xFFFFFFFF
    loge = ((45426 * log2 + 32768) >> 16) & 0xFFFFFFFF
    return (((scale * loge) & 0xFFFFFFFF) + 32768 & 0xFFFFFFFF) >> 16


@micropython.native
def fblog(E, P, k):
    a, y = E.view(4), E.view(2)
    xo = P[k + 2] // 4
    yo = P[k + 3] // 2
    n = P[k + 4]
    cb = P[k + 5]
    scale = P[k + 6]
    for i in range(n):
        v = ((a[xo + i] & 0xFFFFFFFF) << cb) & 0xFFFFFFFF
        if v > 1:
            v = log32(v, scale)
            y[yo + i] = v if v < 32767 else 32767
        else:
            y[yo + i] = 0


# delay record: 2 XO 3 YO (i16: ROWS rows of F samples) 4 F 5 ROWS 6 D (delay_length) 7 STATE (i16
# [ROWS x D]: each row's last D samples). Each row: y = (state ++ x)[:F], state = (state ++ x)[F:]
# (TFLM's circular buffer: D zeros written first, then F in, F out, per call). x and y are two
# buffers.

@micropython.native
def delay(E, P, k):
    a = E.view(2)
    xo = P[k + 2] // 2
    yo = P[k + 3] // 2
    f = P[k + 4]
    rows = P[k + 5]
    d = P[k + 6]
    so = P[k + 7] // 2
    for r in range(rows):
        x0 = xo + r * f
        y0 = yo + r * f
        s0 = so + r * d
        for i in range(f):
            a[y0 + i] = a[s0 + i] if i < d else a[x0 + i - d]
        for j in range(d):  # (reads at or past j: the state shifts in place)
            a[s0 + j] = a[s0 + f + j] if f + j < d else a[x0 + f + j - d]


# stacker record: 2 XO (i16 [C]) 3 YO (i16 [B + 1], B = C * FRAMES, FRAMES = LEFT + RIGHT + 1) 4 C
# 5 LEFT 6 RIGHT 7 STEP (1..FRAMES) 8 STATE (i16 [B + 2]: the frames held, oldest first, then
# their count and 1 once the first frame came). TFLM's circular buffer of B samples, unrolled:
# x in; the first frame again LEFT times; when FRAMES are held, y = them and 1, and the oldest
# STEP leave; else y[B] = 0 (y[:B] untouched, as TFLM's output).

@micropython.native
def stacker(E, P, k):
    a = E.view(2)
    xo = P[k + 2] // 2
    yo = P[k + 3] // 2
    c = P[k + 4]
    left = P[k + 5]
    frames = left + P[k + 6] + 1
    step = P[k + 7]
    so = P[k + 8] // 2
    b = c * frames
    n = a[so + b]
    at = so + n * c
    for i in range(c):
        a[at + i] = a[xo + i]
    n += 1
    if a[so + b + 1] == 0:
        a[so + b + 1] = 1
        for i in range(left * c):
            a[at + c + i] = a[at + i % c]
        n += left
    if n < frames:
        a[yo + b] = 0
    else:
        for i in range(b):
            a[yo + i] = a[so + i]
        a[yo + b] = 1
        n -= step
        for i in range(n * c):
            a[so + i] = a[so + step * c + i]
    a[so + b] = n


# framer record: 2 XO (i16 ROWS x N x STEP) 3 YO (i16 [B + 1], B = ROWS x N x SIZE) 4 ROWS 5 N
# 6 SIZE 7 STEP 8 PREFILL (0, 1) 9 STATE (i16 per row [SIZE + STEP + 1]: the samples held, then
# their count less the prefill, SIZE - STEP zeros or none). TFLM's circular buffer per row,
# unrolled: STEP samples in; SIZE held: a frame out and the oldest STEP leave; else y[B] = 0.

@micropython.native
def framer(E, P, k):
    a = E.view(2)
    xo = P[k + 2] // 2
    yo = P[k + 3] // 2
    rows = P[k + 4]
    frames = P[k + 5]
    size = P[k + 6]
    step = P[k + 7]
    pre = size - step if P[k + 8] else 0
    so = P[k + 9] // 2
    stride = size + step + 1
    b = rows * frames * size
    a[yo + b] = 1
    for r in range(rows):
        s = so + r * stride
        for f in range(frames):
            held = a[s + size + step] + pre
            x0 = xo + (r * frames + f) * step
            for i in range(step):
                a[s + held + i] = a[x0 + i]
            held += step
            if held < size:
                a[yo + b] = 0
            else:
                y0 = yo + (r * frames + f) * size
                for i in range(size):
                    a[y0 + i] = a[s + i]
                held -= step
                for i in range(held):
                    a[s + i] = a[s + step + i]
            a[s + size + step] = held - pre


# overlap records (SOVERLAP i16, FOVERLAP f32): 2 XO (ROWS x N x SIZE) 3 YO (ROWS x N x STEP) 4 ROWS
# 5 N 6 SIZE 7 STEP (1..SIZE) 8 STATE (per row [SIZE]: the sums so far). Each frame: state += x
# (i16: saturated; f32: rounded to f32 by the store), y = state[:STEP], state shifts by STEP.

@micropython.native
def overlap(E, P, k):
    a = E.view(2)
    xo = P[k + 2] // 2
    yo = P[k + 3] // 2
    rows = P[k + 4]
    frames = P[k + 5]
    size = P[k + 6]
    step = P[k + 7]
    so = P[k + 8] // 2
    for r in range(rows):
        s = so + r * size
        for f in range(frames):
            x0 = xo + (r * frames + f) * size
            for i in range(size):
                v = a[s + i] + a[x0 + i]
                a[s + i] = -32768 if v < -32768 else 32767 if v > 32767 else v
            y0 = yo + (r * frames + f) * step
            for i in range(step):
                a[y0 + i] = a[s + i]
            for i in range(size - step):
                a[s + i] = a[s + step + i]
            for i in range(size - step, size):
                a[s + i] = 0


def foverlap(E, P, k):
    a = E.af
    xo = P[k + 2] // 4
    yo = P[k + 3] // 4
    rows = P[k + 4]
    frames = P[k + 5]
    size = P[k + 6]
    step = P[k + 7]
    so = P[k + 8] // 4
    for r in range(rows):
        s = so + r * size
        for f in range(frames):
            x0 = xo + (r * frames + f) * size
            for i in range(size):
                a[s + i] += a[x0 + i]
            y0 = yo + (r * frames + f) * step
            for i in range(step):
                a[y0 + i] = a[s + i]
            for i in range(size - step):
                a[s + i] = a[s + step + i]
            for i in range(size - step, size):
                a[s + i] = 0.0


# irfft record: 2 XO (NFFT/2 + 1 complex i16 per frame) 3 YO (NFFT i16 per frame) 4 NFFT 5 FRAMES
# 6 SCRATCH (5 NFFT / 4 int32: kiss_fftri's buffer of NFFT/2 complex, the table's copy) 7 8 t
# [3 NFFT / 2] i16: rfft's tables with the inverse phases (kiss_fftr_alloc(nfft, inverse=1)).

@micropython.native
def irfft(E, P, k):
    a, t = E.view(2), E.s8[P[k + 7]]
    xo = P[k + 2] // 2
    yo = P[k + 3] // 2
    nfft = P[k + 4]
    frames = P[k + 5]
    buf = P[k + 6] // 2
    tw = buf + nfft
    t0 = P[k + 8]
    for i in range(3 * nfft // 2):
        a[tw + i] = t[t0 + 2 * i] & 255 | t[t0 + 2 * i + 1] << 8
    n = nfft // 2
    s0 = tw + 2 * n  # the super twiddles
    for f in range(frames):
        x0 = xo + f * (nfft + 2)
        a[buf] = _div(_w16(a[x0] + a[x0 + nfft]), 16383)
        a[buf + 1] = _div(_w16(a[x0] - a[x0 + nfft]), 16383)
        for j in range(1, n // 2 + 1):
            fr, fi = _div(a[x0 + 2 * j], 16383), _div(a[x0 + 2 * j + 1], 16383)
            cr, ci = _div(a[x0 + 2 * (n - j)], 16383), _div(_w16(-a[x0 + 2 * (n - j) + 1]), 16383)
            er, ei = _w16(fr + cr), _w16(fi + ci)
            dr, di = _w16(fr - cr), _w16(fi - ci)
            wr, wi = a[s0 + 2 * (j - 1)], a[s0 + 2 * (j - 1) + 1]
            or_ = _w16((dr * wr - di * wi + 16384) >> 15)
            oi = _w16((dr * wi + di * wr + 16384) >> 15)
            a[buf + 2 * j], a[buf + 2 * j + 1] = _w16(er + or_), _w16(ei + oi)
            a[buf + 2 * (n - j)], a[buf + 2 * (n - j) + 1] = _w16(er - or_), _w16(-_w16(ei - oi))
        _work(a, yo + f * nfft, a, buf, 1, n, a, tw, 1)
