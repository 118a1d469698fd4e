"""llama.cpp's server from the ``xllamacpp`` wheel, started with ``llama-server``'s arguments.

``pip install xllamacpp`` brings llama.cpp's own HTTP server (the OpenAI Chat Completions API,
``/props``, ``/v1/models``, ``/health``) prebuilt, with no compiler needed. This script starts
it the way ``llama-server`` is started, so ``bench/bench_real_model.py --llama-server`` and the
docs can use either:

    OMP_NUM_THREADS=2 python bench/xllamacpp_server.py -m model.gguf -c 4096 -np 1 -t 2 \\
        --host 127.0.0.1 --port 8080 [--jinja]

It serves until SIGTERM or SIGINT. Not part of skillvc, not a dependency: a measuring aid.
"""

from __future__ import annotations

import argparse
import signal
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", required=True, help="the .gguf file")
    parser.add_argument("-c", "--ctx-size", type=int, default=4096, help="context tokens")
    parser.add_argument("-np", "--parallel", type=int, default=1, help="slots")
    parser.add_argument("-t", "--threads", type=int, default=2, help="CPU threads")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--jinja",
        action="store_true",
        help="the model's own chat template (llama-server's --jinja): needed for tool calls",
    )
    args = parser.parse_args(argv)

    import xllamacpp as xlc  # only this script needs it

    params = xlc.CommonParams()
    params.model.path = args.model
    # llama-server's -c is the total; each of the -np slots gets an equal share.
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = [args.host]
    params.port = args.port
    params.endpoint_props = True
    params.use_jinja = args.jinja
    server = xlc.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    return 0


if __name__ == "__main__":
    sys.exit(main())
