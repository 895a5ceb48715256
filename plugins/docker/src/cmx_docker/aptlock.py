"""Record a template's apt lock: ``python -m cmx_docker.aptlock TEMPLATE`` simulates the
template's apt install in a container of its base and writes ``containers/<template>/apt.lock``
(what the pins mean and how builds use them: :mod:`cmx_docker.aptpins`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cmx_core.errors import CmxError
from cmx_docker import templates
from cmx_docker.aptpins import APT_LOCK, DEBIAN_SUITE, PIN_LINE, RECORD_SH, requested, suites_sh
from cmx_docker.context import resolve_base
from cmx_docker.engine import find_endpoint, sdk_client
from cmx_docker.errors import ImageUnavailable


def record(name: str) -> tuple[Path, str]:
    """Simulate the template's apt install in a container of its base; write and return its lock."""
    template = templates.load(name)
    endpoint = find_endpoint()
    base = resolve_base(template, endpoint)
    if base.image_id is None:
        raise ImageUnavailable(f"base image {base.ref} is not in {endpoint.runtime}: build it first "
                               "(cmx run recipe --tags=debootstrap,base-image)")
    wanted = requested(template.params.get("apt_packages"))
    client = sdk_client(endpoint)
    try:
        out = client.containers.run(base.image_id, ["sh", "-c", RECORD_SH.format(suites=suites_sh(DEBIAN_SUITE)),
                                                    "sh", *wanted], network_mode="host", remove=True)
    finally:
        client.close()
    text = out.decode() if isinstance(out, bytes) else str(out)
    lists = [line for line in text.splitlines() if line.startswith("# list ")]
    pins = sorted(line for line in text.splitlines() if PIN_LINE.match(line))
    body = (f"# apt closure of {' '.join(wanted)} for template {name}, recorded by `python -m cmx_docker.aptlock "
            f"{name}`\n# base {base.ref} {base.content_id or base.image_id}; package lists read:\n"
            + "".join(f"{line}\n" for line in lists) + "".join(f"{pin}\n" for pin in pins))
    target = template.directory / APT_LOCK
    target.write_text(body)
    return target, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cmx_docker.aptlock", description=__doc__.splitlines()[0])
    parser.add_argument("template", nargs="+")
    args = parser.parse_args(argv)
    try:
        for name in args.template:
            path, body = record(name)
            count = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
            print(f"{path}: {count} packages pinned")
    except CmxError as exc:
        print(f"cmx-docker: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
