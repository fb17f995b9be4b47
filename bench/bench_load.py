"""Load time of a 124M-shaped GPT-2: TF-free reader (this checkout) vs the old TensorFlow path.

    python bench/bench_load.py CHECKPOINT_DIR [--old-rev 41695a7] [--runs 3]

CHECKPOINT_DIR holds OpenAI's files for a 124M-shaped model (checkpoint, hparams.json,
model.ckpt.*, encoder.json, vocab.bpe). Each measurement is a fresh interpreter running
``utils.load_encoder_hparams_and_params('124M', models_dir)`` (the checkout's utils.py, picoGPT's face over
gpt2_numpy/checkpoints.py), wall time including imports:

* cold: an empty models dir, files served by a local HTTP server (download + first load: the
  new path checks every CRC, the old one imports TF and writes its .npy cache);
* warm: the same dir again (new: map the data file; old: map the .npy cache).

The old path is utils.py at ``--old-rev`` (git show), put first on PYTHONPATH in place of the face, run with
this checkout's other modules.
Runs alternate old/new; the best of ``--runs`` is printed, with the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("checkpoint", "encoder.json", "hparams.json", "model.ckpt.data-00000-of-00001", "model.ckpt.index",
         "model.ckpt.meta", "vocab.bpe")
SCRIPT = "import sys, utils; utils.load_encoder_hparams_and_params('124M', sys.argv[1])"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(folder: Path) -> tuple[ThreadingHTTPServer, str]:
    """Serve folder/gpt-2/models/124M/* on 127.0.0.1."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def timed_load(pythonpath: str, models_dir: Path, url: str) -> float:
    env = {**os.environ, "PYTHONPATH": pythonpath, "OPENAIPUBLIC_URL": url, "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", SCRIPT, str(models_dir)], env=env, check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint_dir", type=Path)
    parser.add_argument("--old-rev", default="41695a7")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        served = tmp / "www" / "gpt-2" / "models" / "124M"
        served.mkdir(parents=True)
        for name in FILES:
            source = args.checkpoint_dir / name
            if source.exists():
                os.link(source, served / name) if source.stat().st_dev == served.stat().st_dev \
                    else shutil.copy(source, served / name)
            else:
                (served / name).write_bytes(b"placeholder\n")
        old_path = tmp / "old"
        old_path.mkdir()
        (old_path / "utils.py").write_bytes(subprocess.run(
            ["git", "show", f"{args.old_rev}:utils.py"], cwd=ROOT, check=True, capture_output=True).stdout)
        paths = {"TF-free": str(ROOT), "old TF": f"{old_path}{os.pathsep}{ROOT}"}
        server, url = serve(tmp / "www")
        times: dict[tuple[str, str], list[float]] = {}
        for run in range(args.runs):
            for name, pythonpath in paths.items():
                models = tmp / f"models-{run}-{name.replace(' ', '')}"
                times.setdefault((name, "cold"), []).append(timed_load(pythonpath, models, url))
                times.setdefault((name, "warm"), []).append(timed_load(pythonpath, models, url))
                shutil.rmtree(models)
        server.shutdown()
    print(f"load average {os.getloadavg()[0]:.2f}, best of {args.runs}, fresh interpreter each:")
    for phase in ("cold", "warm"):
        new, old = min(times[("TF-free", phase)]), min(times[("old TF", phase)])
        print(f"  {phase:4s} (download + load)  TF-free {new:6.2f} s   old TF {old:6.2f} s   ({old / new:.1f}x)"
              if phase == "cold" else
              f"  {phase:4s} start            TF-free {new:6.2f} s   old TF {old:6.2f} s   ({old / new:.1f}x)")


if __name__ == "__main__":
    main()
