"""The tests pass wherever the checkout, the temporary directory and HOME are. MicroPython's
heap holds those paths' strings (sys.path, HOME's ~/.micropython/lib on the unix port, the
file names in a test's script), so their lengths move everything the runtime allocates after
them; a test whose outcome depends on the heap's layout passes at some lengths and fails at
others. The low-memory sweep (tests/host/test_lowmem.py, the test most sensitive to the
layout) runs here from paths of several lengths: a symlink to the checkout, the fixture's
files and HOME, each under a directory padded to its own length (`make test-paths` runs the
heap-sensitive test files from real clones at lengths 20 to 80)."""
import os

import pytest

from test_lowmem import files, sweep  # noqa: F401 (files: the fixture)
from host_util import ROOT

# (checkout, temporary directory, HOME) padding in characters: different residues of the
# heap's 32-byte blocks for each, 3 to 62 characters more than the fixture's own paths. The
# sweep checks its own footing each round (no free block but the hole, nothing left from the
# last round, room for the hole), so 512-byte steps from three layouts are enough here.
PADS = [(3, 21, 9), (17, 40, 30), (46, 62, 58)]


@pytest.mark.parametrize("pads", PADS, ids=["-".join(map(str, p)) for p in PADS])
def test_low_memory_sweep_wherever_the_paths_are(files, tmp_path, pads):  # noqa: F811
    root_pad, tmp_pad, home_pad = pads
    root = tmp_path / ("r" * root_pad) / "checkout"
    root.parent.mkdir()
    root.symlink_to(ROOT)
    tmp = tmp_path / ("t" * tmp_pad)
    tmp.mkdir()
    home = tmp_path / ("h" * home_pad)
    home.mkdir()
    moved = dict(files, mpy=str(tmp / "mpy"), paths=[], inputs={}, want={})
    os.symlink(files["mpy"], moved["mpy"])
    for path in files["paths"]:
        link = str(tmp / os.path.basename(path))
        os.symlink(path, link)
        moved["paths"].append(link)
        moved["inputs"][link] = files["inputs"][path]
        moved["want"][link] = files["want"][path]
    sweep(moved, step=512, root=str(root), home=str(home))
