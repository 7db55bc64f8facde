"""Helpers for tests of instemb-rag and of packages built on it: a tiny random Llama model
folder (built in seconds, no download), the location of the development data, a real `serve`
process on an ephemeral port and a local Ray cluster.

Both test suites (tests/ and the LlamaIndex integration's tests/) and benchmarks/bench_serve.py
import from here (``from testing import ...``), so the tiny model is the same everywhere. It
lives beside the tests, not in the package, so the wheel carries no test code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

WORDS = (
    "the a is of and to in for on with this that it tent backpack stove durable light heavy "
    "water rain wind nylon packed size weight kg cm focus durability compact trip camp night "
    "review good bad great poor cold warm fuel gas burner frame strap zipper pole floor seam "
    "question answer instruction text about what which how why does do yes no maybe ."
).split()

# The index tests' small corpus in WORDS: a light tent, a durable one and two other items, so that
# "focus on weight" and "focus on durability" each have one right answer.
TENT_DOCS = {
    "tents/ridge.md": "the tent is durable nylon . good in rain and wind .",
    "tents/light.md": "a light tent . packed size 30 cm . weight 1 kg .",
    "stove.txt": "the stove is light . fuel gas burner .",
    "pack.txt": "the backpack strap and frame are heavy but durable .",
}


def word_level_tokenizer(words: list[str], **special_tokens: str):
    """A word-level fast tokenizer: the special tokens first (in the order given), then ``words``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for token in [*special_tokens.values(), *words]:
        vocab.setdefault(token, len(vocab))
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token=special_tokens["unk_token"]))
    raw.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    return PreTrainedTokenizerFast(tokenizer_object=raw, **special_tokens)


def build_tiny_model_folder(folder: Path, hidden_size: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """A random 2-layer Llama + word-level tokenizer saved as an ordinary HF model folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    words = WORDS + [w.capitalize() for w in WORDS] + [":", ",", "?", "!", "\n"]
    tokenizer = word_level_tokenizer(words, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    vocab = tokenizer.get_vocab()
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


def build_tiny_sentence_encoder_folder(root: Path, max_seq_length: int = 32) -> Path:
    """A saved sentence-transformers folder (1-layer BERT, hidden 32, mean pooling, Normalize) over
    WORDS, for teachers and two-tower sentence encoders; ``root / "model"`` is returned."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *dict.fromkeys(WORDS)]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    bert_dir = root / "bert"
    # transformers 5 reads the vocabulary from `vocab` (a `vocab_file` keyword is ignored: every word [UNK])
    BertTokenizerFast(vocab=str(root / "vocab.txt")).save_pretrained(bert_dir)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(bert_dir)
    transformer = Transformer(str(bert_dir), max_seq_length=max_seq_length)
    model = SentenceTransformer(modules=[transformer, Pooling(32, "mean"), Normalize()], device="cpu")
    model.save(str(root / "model"))
    return root / "model"


def shared_data_dir() -> Path:
    """The development data: ``instemb_rag.paths.data_root()`` ($INSTEMB_DATA_ROOT, else
    ../shared/data beside the checkout)."""
    from instemb_rag.paths import data_root

    return data_root()


def shared_data_or_skip(name: str) -> Path:
    """The folder of one development data set; skips the calling test when it is absent."""
    import pytest

    folder = shared_data_dir() / name
    if not folder.is_dir():
        pytest.skip(
            f"{folder} is absent (development data: $INSTEMB_DATA_ROOT, else ../shared/data beside the checkout)"
        )
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

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_server(
    args: list[str], log_path: Path, env: dict[str, str] | None = None, startup_timeout: float = 900.0
) -> ServerProcess:
    """Start `instemb-rag serve --host 127.0.0.1 --port 0 ARGS` and wait until /health answers.

    The server prints the address it bound; its log (uvicorn's lines) goes to log_path.
    """
    import subprocess
    import sys
    import threading
    import time
    import urllib.request

    from instemb_rag.serve.server import READY_PREFIX

    command = [sys.executable, "-m", "instemb_rag.cli", "serve", "--host", "127.0.0.1", "--port", "0", *args]
    log = open(log_path, "w")
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, **(env or {})}
    )
    found: list[str] = []

    def read_stdout() -> None:
        for line in process.stdout:
            if line.startswith(READY_PREFIX) and not found:
                found.append(line[len(READY_PREFIX) :].strip())

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
    raise RuntimeError(
        f"instemb-rag serve did not start (exit {process.returncode}); log:\n{Path(log_path).read_text()}"
    )


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalRayCluster:
    """A real two-node Ray cluster on 127.0.0.1 for tests: a head and a second node, each started
    with ``ray start --block`` in its own session, every port chosen free (so clusters of other
    processes on the machine are neither joined nor disturbed). ``stop`` ends exactly the
    processes it started (their process groups), never other Ray processes of this user."""

    def __init__(self, folder: Path, nodes: int = 2, cpus_per_node: float = 1, object_store_mb: int = 150):
        import tempfile

        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        # Ray's unix sockets live under the temp dir: keep its path short
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
        self.nodes = nodes
        self.cpus_per_node = cpus_per_node
        self.object_store_bytes = object_store_mb * 1024 * 1024
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.processes: list = []
        # a loopback test cluster: no token (Ray 2.5x+ defaults the head to token auth, which the
        # second node and the drivers would then need); drivers of the tests use the same env
        self.env = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}

    def _node_ports(self) -> list[str]:
        low = free_port()
        return [
            "--node-manager-port",
            str(free_port()),
            "--object-manager-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--dashboard-agent-grpc-port",
            str(free_port()),
            "--runtime-env-agent-port",
            str(free_port()),
            "--metrics-export-port",
            str(free_port()),
            "--min-worker-port",
            str(min(low, 60000)),
            "--max-worker-port",
            str(min(low, 60000) + 200),
        ]

    def _start(self, arguments: list[str], log_name: str) -> None:
        import os
        import subprocess
        import sys

        ray_cli = Path(sys.executable).parent / "ray"
        command = [
            str(ray_cli),
            "start",
            "--block",
            "--num-cpus",
            str(self.cpus_per_node),
            "--disable-usage-stats",
            "--include-log-monitor",
            "false",
            "--node-ip-address",
            "127.0.0.1",
            "--object-store-memory",
            str(self.object_store_bytes),
            *self._node_ports(),
            *arguments,
        ]
        log = open(self.folder / log_name, "ab")
        self.processes.append(
            subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ, **self.env)
            )
        )

    def start(self, timeout: float = 600.0) -> LocalRayCluster:
        """Start the head, then each further node. `ray start` gives a raylet 30 s to register
        (hard-coded); on a loaded machine that can pass and the node gives up, so a node (the
        head included) that exited is started again until ``timeout``."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            head_log = f"head{len(self.processes)}.log"
            self._start(
                [
                    "--head",
                    "--port",
                    str(self.port),
                    "--include-dashboard",
                    "false",
                    "--ray-client-server-port",
                    str(free_port()),
                    "--temp-dir",
                    str(self.temp_dir),
                ],
                head_log,
            )
            if self._wait_registered(1, deadline):
                break
            self._stop_groups()
            self.processes = []
            self.port = free_port()
            self.address = f"127.0.0.1:{self.port}"
        for number in range(1, self.nodes):
            while True:
                self._start(["--address", self.address], f"node{number}-{len(self.processes)}.log")
                if self._wait_registered(number + 1, deadline):
                    break
        return self

    def _wait_registered(self, nodes: int, deadline: float) -> bool:
        """True once ``nodes`` nodes are alive; False when the latest `ray start` exited (retry)."""
        import time

        head, latest = self.processes[0], self.processes[-1]
        while True:
            if latest.poll() is not None:
                if head is not latest and head.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the Ray test cluster did not start: {self.log()[-3000:]}")
                return False
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Ray test cluster did not start in time: {self.log()[-3000:]}")
            if self._listening() and self.alive_nodes() >= nodes:
                return True
            time.sleep(1.0)

    def _listening(self) -> bool:
        import socket

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def alive_nodes(self) -> int:
        """Nodes registered with the head (asked from a short-lived subprocess driver)."""
        import subprocess
        import sys

        probe = (
            f"import ray; ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        try:
            import os

            result = subprocess.run(
                [sys.executable, "-c", probe],
                capture_output=True,
                text=True,
                timeout=120,
                env=dict(os.environ, **self.env),
            )
            return int(result.stdout.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError):
            return 0

    def worker_pids(self, marker: str) -> list[int]:
        """Processes of this cluster (descendants of the nodes it started) whose title has ``marker``."""
        import os

        ours = {p.pid for p in self.processes}
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                title = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in title and self._descends_from(int(entry), ours):
                found.append(int(entry))
        return found

    @staticmethod
    def _descends_from(pid: int, ancestors: set[int]) -> bool:
        import os

        seen = 0
        while pid > 1 and seen < 64:
            try:
                session = os.getsid(pid)
            except OSError:
                return False
            if session in ancestors:  # every node runs in the session its `ray start` opened
                return True
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                pid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
            seen += 1
        return False

    def log(self) -> str:
        return "".join(path.read_text(errors="replace") for path in sorted(self.folder.glob("*.log")))

    def stop(self) -> None:
        """SIGTERM each node's process group (`ray start --block` then stops its node), then SIGKILL
        whatever of those groups is left."""
        import shutil

        self._stop_groups()
        self.processes = []
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _stop_groups(self) -> None:
        import os
        import signal
        import time

        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10  # a node drains up to 30 s on SIGTERM; nothing here needs it
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except Exception:
                pass
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group (workers, agents)
            except ProcessLookupError:
                pass
        leftovers = self.worker_pids("")  # same-session processes that left the group
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def minilm_or_skip() -> None:
    """Skip unless the minilm sentence encoder is installed: the tests that build a two-space model
    from the shipped LLM (``composed_default_dir``) take it as that model's second space. The reason
    says what the test needs, true whichever layout the shipped default has."""
    from instemb_rag.teachers.registry import install_command, installed_teacher_dir, teachers_root

    if installed_teacher_dir("minilm") is None:
        pytest.skip(
            "builds a two-space model (`instemb-rag compose`) from the shipped LLM and the minilm sentence "
            f"encoder, which is not installed under {teachers_root()}: `{install_command('minilm')}` adds it "
            "(about 90 MB)"
        )


def build_tiny_reader_folder(folder: Path, sentence_encoder_folder: Path, fusion_weight: float = 0.3) -> Path:
    """A tiny reader (issue 67) over a tiny sentence-transformers folder, saved as training writes
    final/: LoRA r2 and the head moved off their starting values, so the reader tells texts apart."""
    import json

    import torch

    from instemb_rag.reader.model import ReaderModel

    model = ReaderModel.untrained(str(sentence_encoder_folder), lora_rank=2, max_length=24, seed=0)
    with torch.no_grad():
        for name, parameter in model.bert.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
        model.head.weight.normal_(std=1.0)
    model.save(folder)
    (folder / "fusion.json").write_text(json.dumps({"weight": fusion_weight}))
    return folder
