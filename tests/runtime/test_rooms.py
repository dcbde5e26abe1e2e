# Every op follows the room's shape (docs/OPS.md, issue 29): each record kind has a name, a length
# and a room, mpy_lazy/ops/<room>.py, which names a kernel for each of its kinds and no other
# (KERNELS), has check(r, E) and that reference kernel, and, but for the data-moving room, the
# Op of the description's ops it compiles; every op of the description has a room. Runs on both
# interpreters: every room imports on MicroPython.
from mpy_lazy import graph, kernels, kinds


def test_every_kind_has_a_name_a_length_and_a_room():
    assert len(kinds.NAMES.split()) == len(kinds.LENGTH) == len(kinds.ROOM.split()) == kinds.KINDS
    for table in (kinds.NAMES, kinds.ROOM):  # words one space apart, each followed by one (word() counts them)
        assert table == " ".join(table.split()) + " "
    for kind in range(kinds.KINDS):
        used = kinds.LENGTH[kind] > 0
        assert bool(kinds.word(kinds.NAMES, kind)) == used and bool(kinds.word(kinds.ROOM, kind)) == used, kind
        assert not used or kinds.LENGTH[kind] >= 3, kind  # [kind | line, length, fields...]
    for kind in kinds.FLOATS:
        assert kinds.LENGTH[kind], kind


def test_every_room_owns_its_kinds_with_a_check_and_a_reference_kernel():
    rooms = {}
    for kind in range(1, kinds.KINDS):
        if kinds.word(kinds.ROOM, kind):
            rooms.setdefault(kinds.word(kinds.ROOM, kind), []).append(kind)
    assert len(rooms) >= 17
    for name, owned in rooms.items():
        room = kernels.room(owned[0])
        assert sorted(room.KERNELS) == owned, (name, sorted(room.KERNELS), owned)
        assert callable(room.check), name
        names = [room.KERNELS[kind] for kind in owned]
        assert len(set(names)) == len(names), name  # one name per kind: the fast paths look it up
        for kind in owned:
            assert callable(getattr(room, room.KERNELS[kind])), (name, kind)
            assert kernels.room(kind) is room
        fast = getattr(room, "FAST", "_viper")
        assert fast is None or fast.startswith("_viper"), (name, fast)  # (None: no fast path)
        if name != "move":  # (the data-moving kinds: reshape, concat, slice and pad compile into them)
            assert room.Op.records, name


def test_every_op_of_the_description_has_a_room():
    for name in graph.OPS:
        if name in ("input", "output"):
            continue
        op = kernels.op(name)
        assert op.__name__ == "Op", name


def test_a_program_table_holds_its_kinds_only():
    kernels.use()
    t = kernels.table((kinds.CONV, kinds.SOFTMAX))
    assert len(t) == kinds.KINDS
    assert [k for k in range(kinds.KINDS) if t[k] is not None] == [kinds.CONV, kinds.SOFTMAX]
    assert kernels.table((kinds.CONV, kinds.SOFTMAX)) is t  # (made once per path)
