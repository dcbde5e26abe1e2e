# Every rule of docs/FORMAT.md "Rules a reader enforces" breaks in its own way: one
# ContainerError naming the field (and the tensor), on CPython and MicroPython alike.
import mpy_lazy
from mpy_lazy import ContainerError
from rt_container import patched, get, fix_crc
from rt_util import golden, raises


def fails(buf, field, tensor=None):
    e = raises(ContainerError, mpy_lazy.open, buf)
    assert isinstance(e, ValueError)
    assert e.field == field, (e.field, field, str(e))
    assert field in str(e), str(e)
    if tensor is not None:
        assert e.tensor == tensor, (e.tensor, tensor, str(e))
        assert repr(tensor) in str(e), str(e)
    return e


# rule 1: length and magic
def test_too_short():
    fails(b"", "length")
    fails(golden("tiny.mpyl")[:63], "length")


def test_bad_magic():
    fails(patched("tiny", header=[("magic", b"MPYX")]), "magic")


# rule 2: versions and flags
def test_other_major_version_refused():
    fails(patched("tiny", header=[("version_major", 2)]), "version_major")
    fails(patched("tiny", header=[("version_major", 0)]), "version_major")


def test_newer_minor_version_accepted():
    c = mpy_lazy.open(patched("tiny", header=[("version_minor", 7)]))
    assert c.version == (1, 7)
    assert c.names() == ["fc.bias", "fc.weight", "temperature"]


def test_unknown_flags_refused():
    fails(patched("tiny", header=[("flags", 1)]), "flags")
    fails(patched("tiny", header=[("flags", 0x80000000)]), "flags")


# rule 3: file size, alignment, entry size, table offset
def test_truncated_file():
    data = golden("tiny.mpyl")
    e = fails(data[:-1], "file_size")
    assert "truncated" in str(e)


def test_bytes_after_file_size_ignored():
    c = mpy_lazy.open(golden("tiny.mpyl") + b"trailing junk")
    assert c.file_size == 500
    assert c.verify() == 3


def test_bad_alignment():
    for a in (0, 2, 3, 24, 8192):
        fails(patched("tiny", header=[("alignment", a)]), "alignment")


def test_entry_size_too_small():
    fails(patched("tiny", header=[("entry_size", 32)]), "entry_size")


def test_table_offset_inside_header():
    fails(patched("tiny", header=[("table_offset", 32)]), "table_offset")


# rule 4: regions, data section, counts bounded before use
def test_huge_counts_refused_before_reading():
    fails(patched("tiny", header=[("tensor_count", 0xFFFFFFFF)]), "tensor_count")
    fails(patched("tiny", header=[("meta_count", 0x10000000)]), "meta_count")
    fails(patched("tiny", header=[("strings_size", 0xFFFFFFFF)]), "strings_size")


def test_regions_outside_metadata_part():
    fails(patched("tiny", header=[("strings_offset", 448)]), "strings_offset")
    fails(patched("tiny", header=[("meta_offset", 32)]), "meta_offset")
    fails(patched("tiny", header=[("table_offset", 0xFFFFFF00)]), "table_offset")


def test_regions_overlap():
    # 4 entries of 64 bytes from 64 reach 320: into the metadata table at 256
    fails(patched("tiny", header=[("tensor_count", 4)]), "meta_offset")
    fails(patched("tiny", header=[("strings_offset", 300)]), "strings_offset")


def test_data_offset_rules():
    fails(patched("tiny", header=[("data_offset", 440)]), "data_offset")  # not a multiple of 16
    fails(patched("tiny", header=[("data_offset", 512)]), "data_offset")  # past file_size
    fails(patched("tiny", header=[("data_size", 67)]), "data_size")


# rule 5: header CRC
def test_header_crc():
    buf = bytearray(golden("tiny.mpyl"))
    buf[330] ^= 1  # a byte of the string table
    fails(buf, "header_crc")
    buf = bytearray(golden("tiny.mpyl"))
    buf[55] = 1  # reserved bytes are covered too
    fails(buf, "header_crc")
    fails(patched("tiny", header=[("header_crc", 0)]), "header_crc")


# rule 6: tensor entries
def test_name_length():
    fails(patched("tiny", entries=[(0, "name_len", 0)]), "name_len", 0)
    fails(patched("tiny", entries=[(0, "name_len", 256)]), "name_len", 0)


def test_name_outside_string_table():
    fails(patched("tiny", entries=[(2, "name_offset", 90)]), "name_offset", 2)
    fails(patched("tiny", entries=[(2, "name_offset", 0xFFFFFFFF)]), "name_offset", 2)


def test_name_not_utf8():
    # MicroPython's own decoder accepts all three: the reader's validator must not
    for bad in (b"fc\xc0\xaeias", b"f\xed\xa0\x80ias", b"\xf4\x90\x80\x80ias", b"fc.bia\xc3"):
        fails(patched("tiny", strings=[(0, bad)]), "name", 0)


def test_duplicate_names():
    fails(patched("tiny", entries=[(1, "name_offset", 0), (1, "name_len", 7)]), "name", "fc.bias")


def test_unsorted_names_are_valid():
    # the packer sorts names, the format does not require it: a dict index is used instead
    c = mpy_lazy.open(patched("tiny", entries=[(0, "name_offset", 16), (0, "name_len", 11),
                                               (2, "name_offset", 0), (2, "name_len", 7)]))
    assert c.names() == ["temperature", "fc.weight", "fc.bias"]
    assert c.info("temperature").shape == (3,)
    assert c.info("fc.bias").shape == ()
    assert "fc.weight" in c and "nope" not in c


def test_dtype_code():
    for code in (0, 9, 255):
        fails(patched("tiny", entries=[(1, "dtype", code)]), "dtype", "fc.weight")


def test_ndim_and_shape():
    fails(patched("tiny", entries=[(1, "ndim", 5)]), "ndim", "fc.weight")
    fails(patched("tiny", entries=[(1, "ndim", 3)]), "shape", "fc.weight")  # used dim 2 is 0
    fails(patched("tiny", entries=[(1, "shape1", 0)]), "shape", "fc.weight")
    fails(patched("tiny", entries=[(0, "shape1", 1)]), "shape", "fc.bias")  # unused dim set


def test_nbytes_must_match_shape():
    fails(patched("tiny", entries=[(0, "shape0", 4)]), "nbytes", "fc.bias")
    fails(patched("tiny", entries=[(0, "nbytes", 16)]), "nbytes", "fc.bias")
    fails(patched("tiny", entries=[(1, "dtype", 2)]), "nbytes", "fc.weight")  # f16: 24 bytes


def test_data_offset_alignment_and_bounds():
    fails(patched("tiny", entries=[(1, "data_offset", 452)]), "data_offset", "fc.weight")
    fails(patched("tiny", entries=[(1, "data_offset", 464)]), "data_offset", "fc.weight")  # ends past 500
    fails(patched("tiny", entries=[(1, "data_offset", 416)]), "data_offset", "fc.weight")  # metadata part
    fails(patched("tiny", entries=[(1, "data_offset", 0xFFFFFFF0)]), "data_offset", "fc.weight")


def test_overlapping_tensors():
    e = fails(patched("tiny", entries=[(1, "data_offset", 432)]), "data_offset")
    assert "overlaps" in str(e)
    assert e.tensor in ("fc.bias", "fc.weight")


def test_tensor_flags():
    fails(patched("tiny", entries=[(0, "tensor_flags", 2)]), "tensor_flags", "fc.bias")


def test_quant_fields_of_plain_tensor():
    fails(patched("tiny", entries=[(0, "quant", 3)]), "quant", "fc.bias")
    fails(patched("tiny", entries=[(0, "scale", 1.0)]), "quant", "fc.bias")
    fails(patched("tiny", entries=[(0, "zero_point", 1)]), "quant", "fc.bias")
    fails(patched("tiny", entries=[(0, "quant_axis", 1)]), "quant", "fc.bias")
    fails(patched("tiny", entries=[(0, "scales_index", 1)]), "quant", "fc.bias")
    # per-tensor quantization needs i8 storage
    fails(patched("tiny", entries=[(0, "quant", 1), (0, "scale", 1.0)]), "dtype", "fc.bias")


def test_per_tensor_quant_fields():
    inf = float("inf")
    for s in (0.0, -0.5, inf, -inf, inf - inf):
        fails(patched("int8", entries=[(1, "scale", s)]), "scale", "fc.weight")
    fails(patched("int8", entries=[(1, "zero_point", 128)]), "zero_point", "fc.weight")
    fails(patched("int8", entries=[(1, "zero_point", -129)]), "zero_point", "fc.weight")
    fails(patched("int8", entries=[(1, "scales_index", 0)]), "quant", "fc.weight")


def test_per_channel_quant_fields():
    fails(patched("int8_channel", entries=[(0, "quant_axis", 4)]), "quant_axis", "conv.weight")
    fails(patched("int8_channel", entries=[(0, "scales_index", 0)]), "scales_index", "conv.weight")
    fails(patched("int8_channel", entries=[(0, "scales_index", 5)]), "scales_index", "conv.weight")
    fails(patched("int8_channel", entries=[(0, "scales_index", 0xFFFFFFFF)]), "scales_index", "conv.weight")
    fails(patched("int8_channel", entries=[(0, "scale", 0.5)]), "quant", "conv.weight")
    fails(patched("int8_channel", entries=[(0, "zero_point", 1)]), "quant", "conv.weight")
    fails(patched("int8_channel", entries=[(0, "dtype", 4)]), "dtype", "conv.weight")


def test_per_channel_scales_tensor():
    # scales must be an AUX f32 vector with one scale per channel
    fails(patched("int8_channel", entries=[(1, "tensor_flags", 0)]), "scales_index", "conv.weight")
    fails(patched("int8_channel", entries=[(0, "scales_index", 2)]), "scales_index", "conv.weight")  # fc.bias: 3
    fails(patched("int8_channel", entries=[(0, "quant_axis", 1)]), "scales_index", "conv.weight")  # dim 1, 2 scales


# rule 7: metadata
def test_metadata_outside_string_table():
    fails(patched("tiny", meta=[(0, "key_len", 200)]), "key")
    fails(patched("tiny", meta=[(1, "value_offset", 0xFFFFFFFF)]), "value")


def test_metadata_not_utf8():
    buf = patched("tiny", crc=False)
    ko = get(buf, "strings_offset") + 40  # somewhere in the keys and values after the names
    buf[ko] = 0xFF
    fix_crc(buf)
    e = raises(ContainerError, mpy_lazy.open, buf)
    assert e.field in ("key", "value") and "UTF-8" in str(e)


def test_metadata_keys_unique_and_non_empty():
    m = get(golden("tiny.mpyl"), "meta_offset")
    g = golden("tiny.mpyl")
    import struct
    ko, kl = struct.unpack_from("<II", g, m)
    fails(patched("tiny", meta=[(1, "key_offset", ko), (1, "key_len", kl)]), "key")
    fails(patched("tiny", meta=[(2, "key_len", 0)]), "key")


# rule 8: data CRC on demand
def test_data_crc():
    buf = bytearray(golden("tiny.mpyl"))
    buf[450] ^= 0x40  # inside fc.weight's data: the header CRC does not cover it
    c = mpy_lazy.open(buf)
    c.check("fc.bias")
    e = raises(ContainerError, c.check, "fc.weight")
    assert e.field == "data_crc" and e.tensor == "fc.weight" and "'fc.weight'" in str(e)
    e = raises(ContainerError, c.verify)
    assert e.tensor == "fc.weight"
    e = raises(ContainerError, c.view("fc.weight").check)
    assert e.field == "data_crc"


def test_any_corruption_is_a_container_error():
    # flip bits at every byte of the metadata part (header CRC recomputed so deeper rules run):
    # the reader either refuses with ContainerError or gives views that stay inside the buffer
    data = golden("int8_channel.mpyl")
    end = get(data, "data_offset")
    for pos in range(0, end):
        if 60 <= pos < 64:
            continue
        buf = bytearray(data)
        buf[pos] ^= 0x01 if pos % 2 else 0x80  # low and high bits, alternating
        fix_crc(buf)
        try:
            c = mpy_lazy.open(buf)
        except ContainerError:
            continue
        for n in c.names(aux=True):
            v = c.view(n)
            info = v.info
            assert get(buf, "data_offset") <= info.offset
            assert info.offset + info.nbytes <= len(buf)
            assert len(v.tolist()) == info.size
    for n in range(len(data)):  # every truncation
        raises(ContainerError, mpy_lazy.open, data[:n])


def test_int8_layers_of_a_1_0_container_are_refused():
    # 1.0 int8 biases lack the input zero point (docs/FORMAT.md "Versions"): binding them would
    # compute wrong numbers, so the layer is refused; a float graph of 1.0 still runs.
    from mpy_lazy import model

    old = patched("graph_int8", header=[("version_minor", 0)])
    e = raises(ContainerError, model.from_container, mpy_lazy.open(old))
    assert e.field == "version_minor" and "repack" in str(e), str(e)
    m = model.from_container(mpy_lazy.open(patched("graph_f32", header=[("version_minor", 0)])))
    assert m.macs() > 0
    assert model.from_container(mpy_lazy.open(patched("graph_int8", header=[]))).macs() > 0
