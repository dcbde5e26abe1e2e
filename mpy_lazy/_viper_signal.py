# Viper kernels of the signal library (kinds 88..99; the records and their reference versions,
# @micropython.native: ops/signal.py, whose FAST names this module): imported only for a program
# that has such a record. The same rules as _viper.py (no allocation, no floats, 31-bit
# literals). The FFT is the one kernel of micro_speech's front end worth machine integers (it
# was 60% of a frame; 5.7 ms native -> about 20 us viper on the unix port).
import micropython


@micropython.viper
def rfft(E, P, k: int):
    # kiss_fftr (FIXED_POINT 16) of each frame, as ops/signal.py's rfft: the n = NFFT/2-point complex
    # FFT in the scratch (after the padded frame's place), its input in kf_work's order (a mixed-radix
    # digit reversal), then the butterflies level by level from the innermost (every store an int16)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    xo = a + pp[2]
    yo = a + pp[3]
    frame = int(pp[4])
    nfft = int(pp[5])
    frames = int(pp[6])
    W = ptr16(a + pp[7] + 2 * nfft)
    t = uint(ptr8(E.B[pp[8]])) + pp[9]
    n = nfft >> 1
    T = ptr16(t)
    S = ptr16(t + 4 * n)  # the super twiddles
    inner = 4  # the innermost radix: 2 when n is 2 x a power of 4
    q = n
    while q > 1:
        if q & 3:
            inner = 2
            q = 1
        else:
            q >>= 2
    f = 0
    while f < frames:
        X = ptr16(xo + 2 * frame * f)
        Y = ptr16(yo + 2 * (nfft + 2) * f)
        o = 0
        while o < n:
            rem = o
            mm = n
            ps = 1
            i = 0
            while mm > 1:
                p = 4
                if mm & 3:
                    p = 2
                mm = mm // p
                j = rem // mm
                rem -= j * mm
                i += j * ps
                ps *= p
            r = 0
            im = 0
            if 2 * i < frame:
                r = (X[2 * i] ^ 0x8000) - 0x8000
            if 2 * i + 1 < frame:
                im = (X[2 * i + 1] ^ 0x8000) - 0x8000
            W[2 * o] = r
            W[2 * o + 1] = im
            o += 1
        m = 1
        p = inner
        while m < n:
            size = m * p
            fs = n // size
            g = 0
            while g < n:
                kk = 0
                while kk < m:
                    i0 = 2 * (g + kk)
                    if p == 2:
                        i1 = i0 + 2 * m
                        ar = ((((((W[i0] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        ai = ((((((W[i0 + 1] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        br = ((((((W[i1] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        bi = ((((((W[i1 + 1] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        c = 2 * kk * fs
                        cr = (T[c] ^ 0x8000) - 0x8000
                        ci = (T[c + 1] ^ 0x8000) - 0x8000
                        sr = ((((br * cr - bi * ci + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        si = ((((br * ci + bi * cr + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        W[i1] = ar - sr
                        W[i1 + 1] = ai - si
                        W[i0] = ar + sr
                        W[i0 + 1] = ai + si
                    else:
                        i1 = i0 + 2 * m
                        i2 = i1 + 2 * m
                        i3 = i2 + 2 * m
                        f0r = ((((((W[i0] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        f0i = ((((((W[i0 + 1] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        f1r = ((((((W[i1] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        f1i = ((((((W[i1 + 1] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        f2r = ((((((W[i2] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        f2i = ((((((W[i2 + 1] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        f3r = ((((((W[i3] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        f3i = ((((((W[i3 + 1] ^ 0x8000) - 0x8000) * 8191 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        c = 2 * kk * fs
                        cr = (T[c] ^ 0x8000) - 0x8000
                        ci = (T[c + 1] ^ 0x8000) - 0x8000
                        s0r = ((((f1r * cr - f1i * ci + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        s0i = ((((f1r * ci + f1i * cr + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        c = 4 * kk * fs
                        cr = (T[c] ^ 0x8000) - 0x8000
                        ci = (T[c + 1] ^ 0x8000) - 0x8000
                        s1r = ((((f2r * cr - f2i * ci + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        s1i = ((((f2r * ci + f2i * cr + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        c = 6 * kk * fs
                        cr = (T[c] ^ 0x8000) - 0x8000
                        ci = (T[c + 1] ^ 0x8000) - 0x8000
                        s2r = ((((f3r * cr - f3i * ci + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        s2i = ((((f3r * ci + f3i * cr + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
                        s5r = (((f0r - s1r) & 0xFFFF) ^ 0x8000) - 0x8000
                        s5i = (((f0i - s1i) & 0xFFFF) ^ 0x8000) - 0x8000
                        f0r = (((f0r + s1r) & 0xFFFF) ^ 0x8000) - 0x8000
                        f0i = (((f0i + s1i) & 0xFFFF) ^ 0x8000) - 0x8000
                        s3r = (((s0r + s2r) & 0xFFFF) ^ 0x8000) - 0x8000
                        s3i = (((s0i + s2i) & 0xFFFF) ^ 0x8000) - 0x8000
                        s4r = (((s0r - s2r) & 0xFFFF) ^ 0x8000) - 0x8000
                        s4i = (((s0i - s2i) & 0xFFFF) ^ 0x8000) - 0x8000
                        W[i2] = f0r - s3r
                        W[i2 + 1] = f0i - s3i
                        W[i0] = f0r + s3r
                        W[i0 + 1] = f0i + s3i
                        W[i1] = s5r + s4i
                        W[i1 + 1] = s5i - s4r
                        W[i3] = s5r - s4i
                        W[i3 + 1] = s5i + s4r
                    kk += 1
                g += size
            m = size
            p = 4
        tr = ((((((W[0] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
        ti = ((((((W[1] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
        Y[0] = tr + ti
        Y[1] = 0
        Y[2 * n] = tr - ti
        Y[2 * n + 1] = 0
        j = 1
        while j <= n >> 1:
            pr = ((((((W[2 * j] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
            pi = ((((((W[2 * j + 1] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
            qr = ((((((W[2 * (n - j)] ^ 0x8000) - 0x8000) * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
            qi = (((0 - ((W[2 * (n - j) + 1] ^ 0x8000) - 0x8000)) & 0xFFFF) ^ 0x8000) - 0x8000
            qi = ((((qi * 16383 + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
            f1r = (((pr + qr) & 0xFFFF) ^ 0x8000) - 0x8000
            f1i = (((pi + qi) & 0xFFFF) ^ 0x8000) - 0x8000
            f2r = (((pr - qr) & 0xFFFF) ^ 0x8000) - 0x8000
            f2i = (((pi - qi) & 0xFFFF) ^ 0x8000) - 0x8000
            cr = (S[2 * (j - 1)] ^ 0x8000) - 0x8000
            ci = (S[2 * (j - 1) + 1] ^ 0x8000) - 0x8000
            twr = ((((f2r * cr - f2i * ci + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
            twi = ((((f2r * ci + f2i * cr + 16384) >> 15) & 0xFFFF) ^ 0x8000) - 0x8000
            Y[2 * j] = (f1r + twr) >> 1
            Y[2 * j + 1] = (f1i + twi) >> 1
            Y[2 * (n - j)] = (f1r - twr) >> 1
            Y[2 * (n - j) + 1] = (twi - f1i) >> 1
            j += 1
        f += 1


@micropython.viper
def energy(E, P, k: int):
    # y[i] = re^2 + im^2 (a uint32: the 32-bit store keeps the bits) for start <= i < end, else 0
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    X = ptr16(a + pp[2])
    Y = ptr32(a + pp[3])
    start = int(pp[4])
    end = int(pp[5])
    n = int(pp[6])
    i = 0
    while i < n:
        if start <= i and i < end:
            re = (X[2 * i] ^ 0x8000) - 0x8000
            im = (X[2 * i + 1] ^ 0x8000) - 0x8000
            Y[i] = re * re + im * im
        else:
            Y[i] = 0
        i += 1
