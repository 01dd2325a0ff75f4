"""Start text-generation-webui's ``server.py`` so that it fails the way the rig's engines fail.

    python boot.py SOURCE_DIR [server.py flags...]

Run by textgen's own interpreter (.venv-textgen locally, the image's in a container), before its
modules are imported. Upstream, ``server.py`` moves to a free port when its API port is taken
and keeps serving, model-less, when its model does not load; the rig would then wait on the
wrong port, or measure an engine with nothing to generate with. Here each of those ends the
process at once with one ``error:`` line naming what to do, and exit status 2.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import socket
import sys


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    os._exit(2)  # also past server.py's signal handlers and its API thread


def flag(argv: list[str], name: str, default: str | None = None) -> str | None:
    """The value of ``name`` in ``argv`` (``--name V`` or ``--name=V``), last one wins."""
    value = default
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def check_port(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As uvicorn binds: a port whose last connections linger in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            fail(f"port {port} is already taken: stop what listens there or start textgen on another port")


def check_loader(loader: str | None) -> None:
    if loader == "Transformers" and importlib.util.find_spec("torch") is None:
        fail("text-generation-webui's Transformers loader is not installed here: "
             "run scripts/install_textgen.sh --transformers")


def fail_when_model_does_not_load(model: str | None) -> None:
    import modules.models as models  # parses sys.argv: only once it is server.py's

    load = models.load_model

    def load_or_exit(*args, **kwargs):
        models.load_model = load  # the API's own model loads fail as upstream's do
        loaded = load(*args, **kwargs)
        if loaded[0] is None:
            fail(f"text-generation-webui could not load the model {model!r} with its loader "
                 "(see the lines above): give a model file or folder that loader reads")
        return loaded

    models.load_model = load_or_exit  # server.py imports the name after this, for its start


def main() -> None:
    source, argv = sys.argv[1], sys.argv[2:]
    check_port(int(flag(argv, "--api-port", "5000")))
    check_loader(flag(argv, "--loader"))
    if flag(argv, "--loader") == "ExLlamav3":  # no llama-server to count its tokens (exl3_counter.py)
        import exl3_counter  # beside this file

        exl3_counter.start(int(flag(argv, "--api-port", "5000")),
                           lambda message: print(f"warning: {message}", file=sys.stderr, flush=True))
    os.chdir(source)
    sys.path.insert(0, source)
    sys.argv = [os.path.join(source, "server.py"), *argv]
    fail_when_model_does_not_load(flag(argv, "--model"))
    runpy.run_path("server.py", run_name="__main__")


if __name__ == "__main__":
    main()
