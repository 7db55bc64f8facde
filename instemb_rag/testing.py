"""Helpers for tests of instemb-rag and of packages built on it: a tiny random Llama model
folder (built in seconds, no download) and the location of the development data.

Both test suites (tests/ and the LlamaIndex integration's tests/) import from here, so the
tiny model is the same everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

WORDS = (
    "the a is of and to in for on with this that it tent backpack stove durable light heavy "
    "water rain wind nylon packed size weight kg cm focus durability compact trip camp night "
    "review good bad great poor cold warm fuel gas burner frame strap zipper pole floor seam "
    "question answer instruction text about what which how why does do yes no maybe ."
).split()


def build_tiny_model_folder(folder: Path, hidden_size: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """A random 2-layer Llama + word-level tokenizer saved as an ordinary HF model folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
    for word in WORDS + [w.capitalize() for w in WORDS] + [":", ",", "?", "!", "\n"]:
        vocab.setdefault(word, len(vocab))
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=3,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def shared_data_dir() -> Path:
    """The development data: ``instemb_rag.paths.data_root()`` ($INSTEMB_DATA_ROOT, else
    ../shared/data beside the checkout)."""
    from .paths import data_root

    return data_root()


def shared_data_or_skip(name: str) -> Path:
    """The folder of one development data set; skips the calling test when it is absent."""
    import pytest

    folder = shared_data_dir() / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (development data: $INSTEMB_DATA_ROOT, else ../shared/data beside the checkout)")
    return folder


class ServerProcess:
    """A real `instemb-rag serve` process on an ephemeral loopback port (see start_server)."""

    def __init__(self, process, url: str, log_path: Path):
        self.process = process
        self.url = url
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

    def stop(self, timeout: float = 300.0) -> int:
        """SIGTERM (graceful shutdown), then the exit code; SIGKILL if it does not stop."""
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_server(args: list[str], log_path: Path, env: dict[str, str] | None = None,
                 startup_timeout: float = 900.0) -> ServerProcess:
    """Start `instemb-rag serve --host 127.0.0.1 --port 0 ARGS` and wait until /health answers.

    The server prints the address it bound; its log (uvicorn's lines) goes to log_path.
    """
    import subprocess
    import sys
    import threading
    import time
    import urllib.request

    from .serve.server import READY_PREFIX

    command = [sys.executable, "-m", "instemb_rag.cli", "serve", "--host", "127.0.0.1", "--port", "0", *args]
    log = open(log_path, "w")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True,
                               env={**os.environ, **(env or {})})
    found: list[str] = []

    def read_stdout() -> None:
        for line in process.stdout:
            if line.startswith(READY_PREFIX) and not found:
                found.append(line[len(READY_PREFIX):].strip())

    threading.Thread(target=read_stdout, daemon=True).start()
    deadline = time.monotonic() + startup_timeout
    server = None
    while time.monotonic() < deadline and process.poll() is None:
        if found:
            server = ServerProcess(process, found[0], Path(log_path))
            try:
                with urllib.request.urlopen(server.url + "/health", timeout=10) as response:
                    if response.status == 200:
                        return server
            except OSError:
                pass
        time.sleep(0.1)
    process.kill()
    process.wait()
    log.close()
    raise RuntimeError(f"instemb-rag serve did not start (exit {process.returncode}); log:\n{Path(log_path).read_text()}")
