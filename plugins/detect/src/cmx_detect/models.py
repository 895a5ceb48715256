"""The ``models`` fact: model directories already on this machine, found without downloading.

Where it looks (docs/models.md):

* the Hugging Face hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
  ``~/.cache/huggingface/hub``; each ``models--ORG--NAME/snapshots/REVISION`` directory
  (its files are symlinks into ``../../blobs``) is one model, ``ORG/NAME`` at ``REVISION``;
* the directories listed in ``$CMX_MODEL_PATHS`` (``os.pathsep``-separated), each either a
  model directory (it holds ``config.json``) or a folder of them, one level down;
* MLCommons-style paths: ``$CMX_MLC_MODELS`` (default ``~/MLC/models``, and ``/models``), laid
  out the same way.

For each model: the architecture (``config.json``), the parameter count and dtype (read from
the safetensors headers, no tensor is loaded), the shards, the tokenizer files, a content
digest and tags such as ``llama3.1-8b``. The digest is the sha256 of a manifest of every
file's relative path and sha256; each file's sha256 is cached by its inode, size, mtime and
inode change time (ctime), so a second look at an unchanged tree only stats the files, and an
in-place edit is hashed again even when it keeps the size and puts the mtime back (any write
sets the ctime, and ``os.utime`` cannot set it back): what a lock or bundle replay verifies is
the content, not a stat.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmx_core.errors import UsageError

_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "F8_E4M3": "float8_e4m3fn",
           "F8_E5M2": "float8_e5m2", "I8": "int8", "U8": "uint8", "I32": "int32", "I64": "int64", "BOOL": "bool"}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "merges.txt",
                    "special_tokens_map.json")
_MAX_HEADER = 100 << 20  # a safetensors header larger than this is not one


@dataclass(frozen=True)
class Model:
    """One model directory and what it holds."""

    path: str
    source: str  # hf-cache | path | mlcommons
    name: str
    revision: str | None
    architecture: str | None
    model_type: str | None
    parameters: int | None
    dtype: str | None
    shards: int
    tokenizer: list[str]
    digest: str
    weights_digest: str | None
    files: int
    bytes: int
    tags: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- where to look ----------------------------------------------------------------------------

def hub_cache(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    home = Path(env["HF_HOME"]) if env.get("HF_HOME") else Path.home() / ".cache" / "huggingface"
    return home / "hub"


def candidates(env: Mapping[str, str] | None = None) -> Iterator[tuple[Path, str, str, str | None]]:
    """(directory, source, name, revision) of every model directory the roots hold."""
    env = os.environ if env is None else env
    hub = hub_cache(env)
    if hub.is_dir():
        for repo in sorted(hub.glob("models--*")):
            name = repo.name.removeprefix("models--").replace("--", "/")
            for snapshot in sorted((repo / "snapshots").glob("*")):
                if (snapshot / "config.json").is_file():
                    yield snapshot, "hf-cache", name, snapshot.name
    for text in (env.get("CMX_MODEL_PATHS") or "").split(os.pathsep):
        if text.strip():
            yield from _under(Path(text.strip()).expanduser(), "path", must_exist=True)
    mlc = env.get("CMX_MLC_MODELS")
    for root in ([Path(mlc)] if mlc else [Path.home() / "MLC" / "models", Path("/models")]):
        yield from _under(root, "mlcommons", must_exist=False)


def _under(root: Path, source: str, must_exist: bool) -> Iterator[tuple[Path, str, str, str | None]]:
    if not root.is_dir():
        if must_exist:
            raise UsageError(f"CMX_MODEL_PATHS: {root} is not a directory")
        return
    if (root / "config.json").is_file():
        yield root, source, root.name, None
        return
    for child in sorted(root.iterdir()):
        if child.is_dir() and (child / "config.json").is_file():
            yield child, source, child.name, None


def detect(env: Mapping[str, str] | None = None, cache_file: Path | None = None) -> list[dict[str, Any]]:
    """Every model the roots hold, described (the ``models`` fact)."""
    cache = DigestCache(cache_file)
    seen: set[Path] = set()
    out = []
    for directory, source, name, revision in candidates(env):
        real = directory.resolve()
        if real in seen:
            continue
        seen.add(real)
        out.append(describe(directory, source, name, revision, cache).to_json())
    cache.save()
    return out


def tree_stamp(env: Mapping[str, str] | None = None) -> str:
    """The sha256 of every model file's real path, inode, size, mtime and ctime: part of the
    ``models`` fact's fingerprint, so an in-place edit (even one that restores the mtime)
    refreshes the cached fact at once instead of after its 60 s. Stats only, no file is read."""
    lines = []
    for directory, _source, _name, _revision in candidates(env):
        for file in sorted(p for p in directory.rglob("*") if p.is_file()):
            real = os.path.realpath(file)
            st = os.stat(real)
            lines.append(f"{real}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


# --- one model ----------------------------------------------------------------------------------

def describe(directory: Path, source: str = "path", name: str | None = None, revision: str | None = None,
             cache: DigestCache | None = None) -> Model:
    config = _config(directory)
    files = sorted(p for p in directory.rglob("*") if p.is_file() and not _hidden(p.relative_to(directory)))
    shards = [p for p in files if p.suffix == ".safetensors"]
    parameters, dtype = _safetensors_size(shards)
    if dtype is None and isinstance(config.get("torch_dtype") or config.get("dtype"), str):
        dtype = str(config.get("torch_dtype") or config.get("dtype"))
    cache = cache or DigestCache(None)
    digest = manifest_digest(directory, files, cache)
    weights = weights_digest(directory, cache)
    architectures = config.get("architectures")
    architecture = str(architectures[0]) if isinstance(architectures, list) and architectures else None
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else None
    model = Model(str(directory), source, name or directory.name, revision, architecture, model_type, parameters,
                  dtype, len(shards) or sum(p.suffix == ".bin" for p in files),
                  [p.name for p in files if p.name in _TOKENIZER_FILES], digest, weights, len(files),
                  sum(p.stat().st_size for p in files))
    return Model(**{**asdict(model), "tags": tags(config, parameters, architecture)})


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def _config(directory: Path) -> dict[str, Any]:
    try:
        value = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{directory}/config.json: not readable JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{directory}/config.json: not a JSON object")
    return value


def _safetensors_size(shards: list[Path]) -> tuple[int | None, str | None]:
    """Parameter count and the most common dtype, from the shards' headers only."""
    if not shards:
        return None, None
    total, by_dtype = 0, dict[str, int]()
    for shard in shards:
        with shard.open("rb") as handle:
            head = handle.read(8)
            if len(head) != 8:
                raise UsageError(f"{shard}: not a safetensors file (shorter than its header length)")
            (length,) = struct.unpack("<Q", head)
            if length > _MAX_HEADER:
                raise UsageError(f"{shard}: not a safetensors file (header of {length} bytes)")
            try:
                header = json.loads(handle.read(length))
            except ValueError:
                raise UsageError(f"{shard}: not a safetensors file (header is not JSON)") from None
        for key, tensor in header.items():
            if key == "__metadata__" or not isinstance(tensor, dict):
                continue
            count = 1
            for dim in tensor.get("shape", []):
                count *= int(dim)
            total += count
            dtype = _DTYPES.get(str(tensor.get("dtype")), str(tensor.get("dtype")).lower())
            by_dtype[dtype] = by_dtype.get(dtype, 0) + count
    return total, (max(by_dtype, key=lambda d: by_dtype[d]) if by_dtype else None)


def tags(config: Mapping[str, Any], parameters: int | None, architecture: str | None) -> list[str]:
    """Accelerator-style tags: the model type (``llama``), its size (``llama-8b``) and, for
    Llama 3.1 (rope type llama3, in ``rope_scaling`` or ``rope_parameters``, with a
    131072-token context), ``llama3.1`` and ``llama3.1-8b``."""
    family = str(config.get("model_type") or "").lower()
    out = [family] if family else []
    size = size_tag(parameters)
    if family and size:
        out.append(f"{family}-{size}")
    rope = config.get("rope_scaling") or config.get("rope_parameters")  # transformers 5 writes rope_parameters
    if family == "llama" and isinstance(rope, Mapping) and rope.get("rope_type") == "llama3" \
            and config.get("max_position_embeddings") == 131072:
        out.append("llama3.1")
        if size:
            out.append(f"llama3.1-{size}")
    if architecture:
        out.append(architecture.lower())
    return out


def size_tag(parameters: int | None) -> str | None:
    """``8b`` for 8.03e9 parameters, ``70b``, ``0.5b``; ``tiny`` under ten million."""
    if not parameters:
        return None
    if parameters < 10_000_000:
        return "tiny"
    billions = parameters / 1e9
    return f"{round(billions)}b" if billions >= 1 else f"{round(billions, 1):g}b"


# --- content digest ---------------------------------------------------------------------------

class DigestCache:
    """File sha256s keyed by real path and checked against (inode, size, mtime_ns, ctime_ns).

    The ctime is what makes a cached digest safe for verification: an in-place edit that keeps
    the size and restores the mtime (``os.utime``) still moves the ctime, which no user call
    can set, so the file is hashed again. An entry written before the ctime was kept (four
    fields) never matches and is hashed again once."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, list[Any]] = {}
        self.hashed = 0  # files hashed (not served from the cache) since load
        self._dirty = False
        if path is not None and path.is_file():
            try:
                loaded = json.loads(path.read_text())
                if isinstance(loaded, dict):
                    self.entries = loaded
            except (OSError, ValueError):
                self.entries = {}

    def sha256(self, file: Path) -> str:
        real = os.path.realpath(file)
        stat = os.stat(real)
        key = [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]
        known = self.entries.get(real)
        if known is not None and len(known) == 5 and known[:4] == key:
            return str(known[4])
        digest = hashlib.sha256()
        with open(real, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self.hashed += 1
        if known is not None and len(known) == 5 and known[:3] == key[:3] and known[4] != digest.hexdigest():
            print(f"cmx: warning: model file {real} changed in place with its size and mtime kept "
                  f"(sha256 {str(known[4])[:12]}... -> {digest.hexdigest()[:12]}...)", file=sys.stderr)
        self.entries[real] = [*key, digest.hexdigest()]
        self._dirty = True
        return digest.hexdigest()

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.entries))
        temporary.replace(self.path)
        self._dirty = False


def manifest(directory: Path, files: list[Path], cache: DigestCache) -> str:
    """``RELPATH  SHA256`` lines, sorted: what :func:`manifest_digest` hashes."""
    return "".join(f"{p.relative_to(directory).as_posix()}  {cache.sha256(p)}\n" for p in files)


def manifest_digest(directory: Path, files: list[Path] | None = None, cache: DigestCache | None = None) -> str:
    if files is None:
        files = sorted(p for p in directory.rglob("*") if p.is_file() and not _hidden(p.relative_to(directory)))
    text = manifest(directory, files, cache or DigestCache(None))
    return hashlib.sha256(text.encode()).hexdigest()


WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "*.pt", "*.pth")
"""The weight files, in order of preference: the first pattern matching a file wins."""


def weights_digest(directory: Path, cache: DigestCache | None = None) -> str | None:
    """The digest of the weight files alone: the sha256 of ``SHA256  NAME`` lines (sha256sum's
    format) sorted by name, what cmx-mlperf's SUTs record as ``model.sha256`` and reference
    identity compares (docs/models.md); None without weight files."""
    cache = cache or DigestCache(None)
    for pattern in WEIGHT_PATTERNS:
        found = sorted(p for p in directory.glob(pattern) if p.is_file())
        if found:
            listing = "".join(f"{cache.sha256(p)}  {p.name}\n" for p in sorted(found, key=lambda p: p.name))
            return hashlib.sha256(listing.encode()).hexdigest()
    return None


def select(models: list[Mapping[str, Any]], wanted: list[str]) -> list[Mapping[str, Any]]:
    """The models having every tag of ``wanted`` (a recipe's selection)."""
    need = {t.strip().lower() for t in wanted if t.strip()}
    return [m for m in models if need <= set(m.get("tags") or [])]


def detected_model(models: Any, tags: Any) -> dict[str, Any]:
    """Template function ``detected_model(facts.models, "llama3.1-8b")``: the detected model
    having every tag (comma- or space-separated, or a list). Two models with the same tags are
    told apart by ``@PREFIX`` (of the content digest) or the model's absolute path among the
    tags; several left, or none, is one UsageError listing them."""
    wanted = [str(t) for t in (tags.replace(",", " ").split() if isinstance(tags, str) else list(tags or []))]
    if not wanted:
        raise UsageError("detected_model: give the tags of the model to use (e.g. llama3.1-8b)")
    listed = [m for m in (models or []) if isinstance(m, Mapping)]
    pins = [t for t in wanted if t.startswith(("@", "/"))]
    chosen = [m for m in select(listed, [t for t in wanted if t not in pins]) if all(_pinned(m, p) for p in pins)]
    if not chosen:
        known = "; ".join(f"{m.get('name')}: {','.join(m.get('tags') or [])}" for m in listed) or "none"
        raise UsageError(f"no detected model has the tags {','.join(wanted)} (detected: {known}); "
                         "see cmx detect --only models")
    if len(chosen) > 1:
        found = "; ".join(f"{m.get('name')} at {m.get('path')} (@{str(m.get('digest') or '')[:12]})" for m in chosen)
        raise UsageError(f"{len(chosen)} detected models have the tags {','.join(wanted)}: {found}; add one's "
                         "@DIGEST-PREFIX or its path to the tags to pick it")
    return dict(chosen[0])


def _pinned(model: Mapping[str, Any], pin: str) -> bool:
    """Whether ``model`` is the one ``pin`` names: ``@PREFIX`` of its content digest, or its path."""
    if pin.startswith("@"):
        return len(pin) > 1 and str(model.get("digest") or "").startswith(pin[1:].lower())
    return Path(str(model.get("path") or "")).resolve() == Path(pin).resolve()
