import os
import stat

import pytest

from instemb_rag.atomic import write_atomically, write_text_atomically


def test_new_file_gets_the_umask_permissions_not_owner_only(tmp_path):
    previous = os.umask(0o022)
    try:
        path = write_text_atomically(tmp_path / "report.json", "{}")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text() == "{}"


def test_a_failing_writer_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "manifest.json"
    write_text_atomically(path, "old")

    def write_half_then_fail(stream):
        stream.write(b"new but incomp")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, write_half_then_fail)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
