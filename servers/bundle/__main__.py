"""scripts/gpu_bundle.sh's commands: describe (on the GPU host), build (here), install (there)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from loadtest.toolkit.repo import REPO
from loadtest.toolkit.args import RigParser
from servers.bundle.host import HostDescription, HostError, describe
from servers.bundle.recipes import RECIPES

EXAMPLES = """\
examples:
  scripts/gpu_bundle.sh describe > host.json                    # on the GPU host
  scripts/gpu_bundle.sh build vllm --host host.json --out build/bundles --part-mib 50
  scripts/gpu_bundle.sh build rig --host freeze.txt --python 3.12 --glibc 2.39 --plan
  scripts/gpu_bundle.sh install build/bundles --name vllm --target /opt/rig/vllm   # on the host
  scripts/gpu_bundle.sh install build/bundles --name rig --target /opt/rig/rig     # writes /opt/rig/rig/bin/rig
"""


def _part_mib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"part size {text!r}: a number of MiB") from None
    if not 1 <= value <= 4096:
        raise argparse.ArgumentTypeError(f"part size {text!r}: between 1 and 4096 MiB")
    return value


def parser() -> RigParser:
    cli = RigParser(prog="scripts/gpu_bundle.sh", description=__doc__, epilog=EXAMPLES)
    commands = cli.add_subparsers(dest="command", required=True, metavar="COMMAND")
    say = commands.add_parser("describe", help="this host's Python, glibc, GPUs and packages (JSON)")
    say.add_argument("--python", default=sys.executable, help="the interpreter to describe")
    build = commands.add_parser("build", help="resolve, fetch, trim and pack a bundle for a host")
    build.add_argument("name", choices=sorted(RECIPES), help="what to bundle")
    build.add_argument("--host", type=Path, required=True,
                       help="describe's JSON, or the host's `pip list --format=freeze`")
    build.add_argument("--python", help="the host's Python, major.minor (with a freeze file)")
    build.add_argument("--glibc", help="the host's glibc, 2.N (with a freeze file)")
    build.add_argument("--compute-cap", action="append", default=[],
                       help="a GPU's compute capability, N.N, once per GPU: what it cannot use is trimmed")
    build.add_argument("--out", type=Path, default=REPO / "build/bundles", help="where the parts go")
    build.add_argument("--part-mib", type=_part_mib, default=50.0, help="each part's size (MiB)")
    build.add_argument("--cache", type=Path, default=REPO / "build/bundle-cache",
                       help="fetched wheels, kept for the next build")
    build.add_argument("--plan", action="store_true", help="resolve and list; fetch nothing")
    build.add_argument("--without-prebuilt", action="store_true",
                       help="leave out what the recipe compiles here for the host (exllamav3's "
                            "extension: the host then compiles it on first import)")
    put = commands.add_parser("install", help="check, unpack and install a bundle (on the host)")
    put.add_argument("folder", type=Path, help="the folder holding NAME.bundle.json and its parts")
    put.add_argument("--name", help="which bundle, where the folder holds several")
    put.add_argument("--target", type=Path, required=True, help="the folder to install into")
    put.add_argument("--python", default=sys.executable, help="the host's interpreter")
    return cli


def _build(args: argparse.Namespace) -> int:
    from servers.bundle.pack import PackError, pack
    from servers.bundle.prebuilt import PrebuiltError, find_prebuilt
    from servers.bundle.resolve import ResolveError, resolve

    try:
        recipe = RECIPES[args.name].expanded()
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not args.plan:  # before minutes of resolving and fetching
        args.out.mkdir(parents=True, exist_ok=True)
        args.cache.mkdir(parents=True, exist_ok=True)
    host = HostDescription.read(args.host, python=args.python or "", glibc=args.glibc or "",
                                compute_caps=tuple(args.compute_cap))
    try:
        locked = resolve(recipe, host, REPO / "build/bundle-resolve" / args.name)
        print(f"{args.name} for Python {host.python} on {host.manylinux}, GPUs "
              f"{', '.join(host.compute_caps) or 'unknown'}: {len(locked)} wheels the host lacks, "
              f"{sum(l.size for l in locked) / 1e6:,.0f} MB from the index; left out: "
              f"{', '.join(recipe.left_out) or 'nothing'}")
        wanted = () if args.without_prebuilt else recipe.prebuilt
        prebuilt = [find_prebuilt(p, host, locked) for p in wanted]
        for wheel, item in zip(prebuilt, wanted):
            print(f"  prebuilt {wheel.path.name}  {wheel.path.stat().st_size / 1e6:,.1f} MB "
                  f"(compute capability {wheel.facts.get('arch')}): {item.why}")
        if args.plan:
            for lock in locked:
                print(f"  {lock.name}=={lock.version}  {lock.size / 1e6:,.1f} MB")
            return 0
        left_to_compile = tuple(p.name for p in recipe.prebuilt if p not in wanted)
        manifest = pack(recipe, host, locked, args.out, args.cache, args.part_mib,
                        prebuilt=tuple(w.path for w in prebuilt),
                        compiles_on_import=left_to_compile)
    except (ResolveError, PackError, PrebuiltError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for item in manifest["trimmed"]:
        print(f"  trimmed {item['files']} file(s) of {item['wheel']}, {item['bytes'] / 1e6:,.1f} MB "
              f"(largest {item['largest']}): {item['why']}")
    print(f"{len(manifest['parts'])} parts, {manifest['packed_bytes'] / 2**20:,.1f} MiB "
          f"({manifest['unpacked_bytes'] / 2**20:,.0f} MiB of wheels) in {args.out} "
          f"({manifest['pack_s']} s): {args.name}.bundle.json and "
          f"{', '.join(p['file'] for p in manifest['parts'])}")
    print(f"carry them into one folder on the host (any order, one at a time), then there: "
          f"scripts/gpu_bundle.sh install FOLDER --name {args.name} --target /opt/rig/{args.name}")
    return 0


def _install(args: argparse.Namespace) -> int:
    from servers.bundle.install import InstallError, install

    try:
        result = install(args.folder, args.target, args.name, args.python)
    except InstallError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"installed {result['name']} ({result['module']} {result['version']}; {result['wheels']} wheels, "
          f"unpacked in {result['unpack_s']} s, installed in {result['install_s']} s): run it with "
          f"{result['python']}")
    for command in result["commands"]:
        print(f"  command: {command} (export PATH={Path(command).parent}:$PATH)")
    for module in result["compiles_on_import"]:
        print(f"  not imported: {result['module']}'s first import compiles {module} (minutes; "
              f"built --without-prebuilt): once, on its own, {result['python']} -c "
              f"'import {result['module']}'")
    for dist, requirement, have, _ in result["left_out_unmet"]:
        print(f"  left out by the recipe: {dist} asks for {requirement}")
    for dist, requirement, have, _ in result["unmet"]:
        print(f"  warning: {dist} asks for {requirement}, the host has {have or 'none'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "describe":
            print(describe(args.python).to_json(), end="")
            return 0
        return _build(args) if args.command == "build" else _install(args)
    except HostError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # an --out, --target, --cache or --python that cannot be used
        print(f"error: {error.strerror or error}: {error.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as error:
        print(f"error: {' '.join(map(str, error.cmd))} failed (exit {error.returncode})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
