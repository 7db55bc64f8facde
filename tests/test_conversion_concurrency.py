"""Two processes that need the default model at once convert it only once."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

CONVERT = "from instemb_rag.encoder.backbone import convert_default_model;print(convert_default_model())"


def test_two_processes_convert_once(tmp_path):
    env = {**__import__("os").environ, "INSTEMB_HOME": str(tmp_path)}
    first = subprocess.Popen(
        [sys.executable, "-c", CONVERT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    second = subprocess.Popen(
        [sys.executable, "-c", CONVERT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    outputs = [process.communicate(timeout=600) for process in (first, second)]
    assert [process.returncode for process in (first, second)] == [0, 0], outputs
    folders = {out.strip() for out, _ in outputs}
    assert len(folders) == 1
    # Exactly one conversion ran: only one process said it was converting the default model.
    assert sum("converting the default model" in err.lower() for _, err in outputs) == 1
    models = tmp_path / "models"
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == ["smollm2-135m-instruct"]
    marker = json.loads((models / "smollm2-135m-instruct" / "instemb_conversion.json").read_text())
    assert marker["fingerprint"].startswith("gguf-")
