# Viper kernels: integer-only inner loops (viper has no floats). Imported by mpy_lazy.nn on
# MicroPython only; the decorators do not exist on CPython.
#
# int8 operands come in as bytes-like objects read through ptr8, which yields 0..255:
# ((v ^ 0x80) - 0x80) turns that into the signed value without a branch.
# Accumulators are array('i') (int32); per output |acc| <= 127 * 127 * n, so n < 133 000.
import micropython


@micropython.viper
def dense_i8(w, x, acc, n_in: int, n_out: int):
    # acc[o] = sum_i w[o * n_in + i] * x[i]        (w: [n_out, n_in] int8)
    pw = ptr8(w)
    px = ptr8(x)
    pa = ptr32(acc)
    end = n_in - 3
    k = 0
    o = 0
    while o < n_out:
        s = 0
        i = 0
        while i < end:  # 4 at a time: fewer loop tests
            j = k + i
            s += (((pw[j] ^ 0x80) - 0x80) * ((px[i] ^ 0x80) - 0x80)
                  + ((pw[j + 1] ^ 0x80) - 0x80) * ((px[i + 1] ^ 0x80) - 0x80)
                  + ((pw[j + 2] ^ 0x80) - 0x80) * ((px[i + 2] ^ 0x80) - 0x80)
                  + ((pw[j + 3] ^ 0x80) - 0x80) * ((px[i + 3] ^ 0x80) - 0x80))
            i += 4
        while i < n_in:
            s += ((pw[k + i] ^ 0x80) - 0x80) * ((px[i] ^ 0x80) - 0x80)
            i += 1
        pa[o] = s
        k += n_in
        o += 1


@micropython.viper
def dense_i8_t(w, x, acc, n_in: int, n_out: int):
    # acc[o] = sum_i w[i * n_out + o] * x[i]       (w: [n_in, n_out] int8, ONNX MatMul layout)
    pw = ptr8(w)
    px = ptr8(x)
    pa = ptr32(acc)
    o = 0
    while o < n_out:
        pa[o] = 0
        o += 1
    k = 0
    i = 0
    while i < n_in:
        xi = (px[i] ^ 0x80) - 0x80
        if xi != 0:
            o = 0
            while o < n_out:
                pa[o] = pa[o] + ((pw[k + o] ^ 0x80) - 0x80) * xi
                o += 1
        k += n_out
        i += 1


@micropython.viper
def conv_i8(w, x, acc, dims):
    # acc[o, y, x] = sum_{c, ky, kx} w[o, c, ky, kx] * x[c, y * sh + ky, x * sw + kx]
    # x is the already zero-padded int8 input [c_in, hp, wp]; dims is array('i') of
    # c_in, hp, wp, c_out, kh, kw, sh, sw, oh, ow (too many for arguments).
    pw = ptr8(w)
    px = ptr8(x)
    pa = ptr32(acc)
    pd = ptr32(dims)
    c_in = pd[0]
    hp = pd[1]
    wp = pd[2]
    c_out = pd[3]
    kh = pd[4]
    kw = pd[5]
    sh = pd[6]
    sw = pd[7]
    oh = pd[8]
    ow = pd[9]
    ksize = c_in * kh * kw
    a = 0
    o = 0
    while o < c_out:
        y = 0
        while y < oh:
            xo = 0
            while xo < ow:
                s = 0
                wk = o * ksize
                c = 0
                while c < c_in:
                    row = (c * hp + y * sh) * wp + xo * sw
                    ky = 0
                    while ky < kh:
                        kx = 0
                        while kx < kw:
                            s += ((pw[wk + kx] ^ 0x80) - 0x80) * ((px[row + kx] ^ 0x80) - 0x80)
                            kx += 1
                        wk += kw
                        row += wp
                        ky += 1
                    c += 1
                pa[a] = s
                a += 1
                xo += 1
            y += 1
        o += 1


@micropython.viper
def f16_to_f32(src, first: int, dst, n: int):
    # dst[i] = float(src[first + i]) for i < n: IEEE half -> single by bit manipulation, written
    # as raw bits into dst (array('f')), so no float is ever made (an RP2040 has no FPU).
    ps = ptr16(src)
    pd = ptr32(dst)
    exp_max = 0xFF
    exp_max <<= 23  # 0x7F800000 built at run time: as a literal it is no small int on 32-bit ports
    i = 0
    while i < n:
        h = ps[first + i]
        sign = (h & 0x8000) << 16
        e = (h >> 10) & 0x1F
        m = h & 0x3FF
        if e == 31:
            f = sign | exp_max | (m << 13)
        elif e != 0:
            f = sign | ((e + 112) << 23) | (m << 13)
        elif m == 0:
            f = sign
        else:  # subnormal half: normalise
            e = 113
            while (m & 0x400) == 0:
                m <<= 1
                e -= 1
            f = sign | (e << 23) | ((m & 0x3FF) << 13)
        pd[i] = f
        i += 1


# Native (not viper) float loops around the integer kernels: the same arithmetic, in the same
# order, as mpy_lazy.nn's pure-Python versions, so both paths give identical results.
@micropython.native
def quantize(x, n, q):
    amax = 0.0
    for i in range(n):
        v = x[i]
        if v > amax:
            amax = v
        elif -v > amax:
            amax = -v
    if amax == 0.0:
        return 0.0
    inv = 127.0 / amax
    for i in range(n):
        q[i] = round(x[i] * inv)
    return amax / 127.0


@micropython.native
def rescale(acc, out, n, s, scales):
    if scales is None:
        for o in range(n):
            out[o] = acc[o] * s
    else:
        for o in range(n):
            out[o] = acc[o] * (s * scales[o])
