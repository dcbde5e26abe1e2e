"""The README's `.tflite` coverage table (tools/op_table.py): current with the TYPES the host's
rooms declare, every builtin mpy-lazy converts declared in its room, and none claiming a type
TFLM's kernel does not take (TFLM's interpreter is the reference the tests compare against)."""
import importlib
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import op_table  # noqa: E402

from host_tools.tflite_import import ROOMS  # noqa: E402


def test_readme_table_is_current():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert op_table.replace(text, op_table.table()) == text, \
        "README.md's op table is stale: .venv/bin/python tools/op_table.py --write README.md"


@pytest.mark.parametrize("builtin", sorted(ROOMS))
def test_every_converted_builtin_declares_its_types(builtin):
    types = getattr(importlib.import_module("host_tools.ops." + ROOMS[builtin]), "TYPES", {})
    assert builtin in types, "host_tools/ops/%s.py: TYPES lacks %s" % (ROOMS[builtin], builtin)
    words = types[builtin].split()
    assert words and all(w in op_table.ORDER for w in words), (builtin, types[builtin])
    tflm = op_table.TFLM.get(builtin) or op_table.SIGNAL[builtin]
    if tflm != op_table.ANY:
        assert set(words) <= set(tflm.split()), (builtin, words, "TFLM takes", tflm)


def test_types_name_only_builtins_of_their_room():
    rooms = sorted(set(ROOMS.values()))
    for room in rooms:
        for builtin in getattr(importlib.import_module("host_tools.ops." + room), "TYPES", {}):
            assert ROOMS.get(builtin) == room, (room, builtin)


def test_the_table_names_a_missing_declaration(monkeypatch):
    """A builtin converted without TYPES stops the table (not a row claiming nothing)."""
    monkeypatch.setitem(ROOMS, "ELU", "act")
    with pytest.raises(KeyError, match="ELU"):
        op_table.table()
