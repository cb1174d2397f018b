"""kiln.hub: torch.hub's API (torch 2.13) for repositories with a hubconf.py, offline, loading weights safely.

Repositories. ``load(repo_or_dir, model, *args, source=..., **kwargs)`` imports the repository's
``hubconf.py`` (the repository folder on sys.path while it is imported and while the entry point runs,
as torch) and calls the entry point ``model`` with ``*args, **kwargs``; ``list`` names the entry points
(callable attributes not starting with "_"), ``help`` returns one's docstring. A hubconf may name the
modules it needs in ``dependencies``. ``source="local"``: ``repo_or_dir`` is a folder holding hubconf.py.
``source="github"``: ``"owner/repo[:ref]"`` resolves through torch's cache layout under ``get_dir()``:

    <hub_dir>/<owner>_<repo>_<ref>/hubconf.py    the repository ("/" in ref written "_")
    <hub_dir>/<ref>.zip                          a GitHub zipball (its single top folder is the repository),
                                                 extracted to the folder above and then removed, as torch
    <hub_dir>/trusted_list                       trusted repositories, one "owner_repo" a line
    <hub_dir>/checkpoints/<file>                 weights fetched by load_state_dict_from_url

kiln has no network access: a repository or a weight file that is in none of these places raises
NoNetworkError (a urllib.error.URLError, what torch raises when the network fails, and a RuntimeError,
what torch raises for a repository without a ref that is not cached), saying where to put it. Without a
ref, "main" is used, or "master" where only that one is there. ``skip_validation`` is accepted and does
nothing: there is no GitHub API to ask whether a ref belongs to the repository.

Trust (torch 2.13's rules). A repository is trusted when "owner_repo" is in trusted_list, its folder is
already in the cache (torch's legacy rule) or its owner is in _TRUSTED_OWNERS. ``trust_repo=False`` always
asks ``input()``; ``"check"`` (the default) asks when the repository is not trusted; True and None trust
it. "y"/"yes" goes on, "n"/"no"/"" raises Exception("Untrusted repository."), anything else ValueError. A
repository trusted this way is added to trusted_list. kiln goes further: where there is no terminal to ask
(input() raises EOFError or OSError) it raises RuntimeError saying to pass trust_repo=True, where torch
would hang or fail on stdin.

Weights run no code. ``load_state_dict_from_url`` and ``load_weights`` read ``.safetensors`` files with
kiln.io.load_file and everything else with kiln.load(weights_only=True) (weights_only=False is the
caller's choice, as torch). A hubconf.py may pin its weight files by SHA-256 with a module-level dict
``weights_sha256 = {"file_name": "hexdigest"}``: while one of its entry points runs (called by
hub.load), every file loaded through load_state_dict_from_url or load_weights whose name is a key
there must have that digest, else RuntimeError naming the file and both digests. ``check_hash=True``
checks the ``name-<sha256 prefix>.ext`` convention, as torch, also for a file found in the cache (the
cache is where an offline user puts the download).

URLs: ``file://`` URLs and plain paths are copied (torch's download, written beside the destination and
renamed over it); http(s) URLs are only served from the cache.
"""
import builtins
import contextlib
import contextvars
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import uuid
import zipfile
from urllib.error import URLError
from urllib.parse import urlparse
from urllib.request import url2pathname

from . import io as _io
from .serialization import load as _kiln_load

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "load_weights",
           "set_dir", "NoNetworkError"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")  # torch's: matches bfd8deac in resnet18-bfd8deac.pth
MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"
VAR_WEIGHTS_SHA256 = "weights_sha256"
_TRUSTED_OWNERS = {"kiln"}
_CHUNK = 128 * 1024
_hub_dir = None
_pins = contextvars.ContextVar("kiln_hub_pins", default=None)  # weights_sha256 of the running entry point


class NoNetworkError(URLError, RuntimeError):
    """Something had to be downloaded; kiln has no network access. The message says where to put it."""


# ---- the cache directory ---------------------------------------------------------------------------------
def get_dir():
    """The hub directory: set_dir's, else ``$KILN_HOME/hub`` (KILN_HOME defaults to ``$XDG_CACHE_HOME/kiln``,
    XDG_CACHE_HOME to ``~/.cache``)."""
    if _hub_dir is not None:
        return _hub_dir
    xdg = os.getenv("XDG_CACHE_HOME", "~/.cache")
    return os.path.join(os.path.expanduser(os.getenv("KILN_HOME", os.path.join(xdg, "kiln"))), "hub")


def set_dir(d):
    """Sets the hub directory (``~`` expanded)."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


# ---- repositories ----------------------------------------------------------------------------------------
def _parse_repo_info(github):
    repo_info, _, ref = github.partition(":")
    parts = repo_info.split("/")
    if len(parts) != 2 or not all(parts) or ":" in ref:
        raise ValueError(f'Invalid repository "{github}": expected "owner/repo[:ref]"')
    owner, name = parts
    if not ref:  # torch asks GitHub for the default branch; offline it takes main, else master, from the cache
        hub_dir = get_dir()
        for candidate in ("main", "master"):
            if os.path.exists(os.path.join(hub_dir, f"{owner}_{name}_{candidate}")):
                return owner, name, candidate
        for candidate in ("main", "master"):
            if os.path.exists(os.path.join(hub_dir, candidate + ".zip")):
                return owner, name, candidate
        raise NoNetworkError(
            f"kiln has no network access and the repository {owner}/{name} is not in the cache ({hub_dir}): "
            f"put it at {os.path.join(hub_dir, f'{owner}_{name}_main')} (a folder with its hubconf.py) or its "
            f"GitHub zipball at {os.path.join(hub_dir, 'main.zip')}")
    return owner, name, ref


def _ask(question, owner_name, trusted_list):
    try:
        return builtins.input(question)
    except (EOFError, OSError):  # no terminal: stdin closed, or captured
        raise RuntimeError(
            f"The repository {owner_name} needs your confirmation to be trusted, and there is no terminal to "
            f"ask: pass trust_repo=True to trust it (it is then added to {trusted_list})") from None


def _check_repo_is_trusted(owner, name, owner_name_ref, trust_repo):
    hub_dir = get_dir()
    trusted_list = os.path.join(hub_dir, "trusted_list")
    if not os.path.exists(trusted_list):
        open(trusted_list, "a").close()
    with open(trusted_list) as f:
        trusted = {line.strip() for line in f}
    cached = next(os.walk(hub_dir))[1]  # torch: a repository already downloaded is trusted
    owner_name = f"{owner}_{name}"
    is_trusted = owner_name in trusted or owner_name_ref in cached or owner in _TRUSTED_OWNERS
    if trust_repo is False or (trust_repo == "check" and not is_trusted):
        response = _ask(
            f"The repository {owner_name} does not belong to the list of trusted repositories and as such cannot "
            "be downloaded. Do you trust this repository and wish to add it to the trusted list of repositories "
            "(y/N)?", owner_name, trusted_list)
        if response.lower() in ("y", "yes"):
            if is_trusted:
                print("The repository is already trusted.")
        elif response.lower() in ("n", "no", ""):
            raise Exception("Untrusted repository.")
        else:
            raise ValueError(f"Unrecognized response {response}.")
    if not is_trusted:
        with open(trusted_list, "a") as f:
            f.write(owner_name + "\n")


def _extract_repo(archive, repo_dir, hub_dir):
    """Extracts a zipball's single top folder to repo_dir; entries leaving the archive's folder raise."""
    tmp = os.path.join(hub_dir, f".extract-{uuid.uuid4().hex}")
    try:
        with zipfile.ZipFile(archive) as zf:
            root = os.path.realpath(tmp)
            names = [m.filename.replace("\\", "/") for m in zf.infolist()]
            for n in names:  # zip slip: every entry stays inside the extraction folder
                if os.path.commonpath([root, os.path.realpath(os.path.join(root, n))]) != root:
                    raise ValueError(f"Archive entry escapes target directory: {n}")
            tops = {n.split("/")[0] for n in names}
            if len(tops) != 1 or not any("/" in n.rstrip("/") for n in names):
                raise RuntimeError(f"{archive}: a repository archive holds a single top-level folder")
            zf.extractall(tmp)
        if os.path.lexists(repo_dir):
            shutil.rmtree(repo_dir)
        shutil.move(os.path.join(tmp, tops.pop()), repo_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    os.remove(archive)


def _get_cache_or_reload(github, force_reload, trust_repo, verbose=True, skip_validation=False):
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    owner, name, ref = _parse_repo_info(github)
    normalized_ref = ref.replace("/", "_")
    owner_name_ref = f"{owner}_{name}_{normalized_ref}"
    repo_dir = os.path.join(hub_dir, owner_name_ref)
    _check_repo_is_trusted(owner, name, owner_name_ref, trust_repo)
    if not force_reload and os.path.exists(repo_dir):
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    archive = os.path.join(hub_dir, normalized_ref + ".zip")
    if not os.path.exists(archive):
        raise NoNetworkError(
            f"kiln has no network access and cannot download {owner}/{name} at {ref}"
            f"{' (force_reload=True)' if force_reload else ''}: put the repository at {repo_dir} (a folder with "
            f"its hubconf.py) or its GitHub zipball (https://github.com/{owner}/{name}/zipball/{ref}) at {archive}")
    _extract_repo(archive, repo_dir, hub_dir)
    return repo_dir


@contextlib.contextmanager
def _on_sys_path(path):
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def _import_hubconf(repo_dir):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    spec = importlib.util.spec_from_file_location(MODULE_HUBCONF, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _module_exists(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing
        return False


def _load_entry_from_hubconf(m, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    missing = [pkg for pkg in getattr(m, VAR_DEPENDENCY, None) or [] if not _module_exists(pkg)]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    func = getattr(m, model, None) if model in dir(m) else None
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def _weight_pins(m):
    pins = getattr(m, VAR_WEIGHTS_SHA256, None)
    if pins is None:
        return {}
    if not isinstance(pins, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items()):
        raise TypeError(f"{VAR_WEIGHTS_SHA256} in hubconf.py must be a dict of file name -> sha256 hex digest")
    return {k: v.lower() for k, v in pins.items()}


def _load_local(hubconf_dir, model, *args, **kwargs):
    with _on_sys_path(hubconf_dir):
        m = _import_hubconf(hubconf_dir)
        entry = _load_entry_from_hubconf(m, model)
        token = _pins.set(_weight_pins(m))
        try:
            return entry(*args, **kwargs)
        finally:
            _pins.reset(token)


def list(github, force_reload=False, skip_validation=False, trust_repo="check", verbose=True):
    """The names of the entry points of ``github``'s hubconf.py (callables not starting with "_")."""
    repo_dir = _get_cache_or_reload(github, force_reload, trust_repo, verbose, skip_validation)
    with _on_sys_path(repo_dir):
        m = _import_hubconf(repo_dir)
    return [f for f in dir(m) if callable(getattr(m, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo="check"):
    """The docstring of entry point ``model`` of ``github``'s hubconf.py."""
    repo_dir = _get_cache_or_reload(github, force_reload, trust_repo, True, skip_validation)
    with _on_sys_path(repo_dir):
        m = _import_hubconf(repo_dir)
    return _load_entry_from_hubconf(m, model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """Calls entry point ``model`` of a repository's hubconf.py with ``*args, **kwargs`` and returns its result.

    source="github": repo_or_dir is "owner/repo[:ref]", found in the cache (see the module docstring);
    source="local": a folder holding hubconf.py (no trust check, force_reload and verbose have no effect)."""
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        repo_or_dir = _get_cache_or_reload(repo_or_dir, force_reload, trust_repo, verbose, skip_validation)
    return _load_local(repo_or_dir, model, *args, **kwargs)


# ---- files and weights -----------------------------------------------------------------------------------
def _local_source(url):
    """The local path a URL names, or None for a network URL (http, https, ftp)."""
    parts = urlparse(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URL with a remote host: {url}")
        return url2pathname(parts.path)
    if parts.scheme in ("http", "https", "ftp"):
        return None
    if parts.scheme == "" or os.path.exists(url):  # a plain path (a Windows drive letter parses as a scheme)
        return url
    raise ValueError(f"unknown url type: {url!r}")


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_prefix(digest, hash_prefix):
    if digest[:len(hash_prefix)] != hash_prefix:
        raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Copies the object at ``url`` (a file:// URL or a local path) to ``dst``, through a temporary file beside
    it, as torch's download; with ``hash_prefix``, its SHA-256 must start with it (else RuntimeError). http(s)
    URLs raise NoNetworkError. ``progress`` is accepted (a local copy shows no progress bar)."""
    dst = os.path.expanduser(os.fspath(dst))
    src = _local_source(os.fspath(url))
    if src is None:
        raise NoNetworkError(f"kiln has no network access and cannot download {url}: fetch it elsewhere and "
                             f"put it at {dst}")
    tmp = f"{dst}.{uuid.uuid4().hex}.partial"
    try:
        h = hashlib.sha256()
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            for chunk in iter(lambda: fin.read(_CHUNK), b""):
                fout.write(chunk)
                h.update(chunk)
        if hash_prefix is not None:
            _check_prefix(h.hexdigest(), hash_prefix)
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _fetch(url, model_dir, file_name, check_hash, progress):
    """The cached copy of ``url`` in model_dir (default <hub_dir>/checkpoints), copied there if missing."""
    model_dir = os.path.join(get_dir(), "checkpoints") if model_dir is None else os.fspath(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    url = os.fspath(url)
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    match = HASH_REGEX.search(filename) if check_hash else None
    hash_prefix = match.group(1) if match else None
    if not os.path.exists(cached_file):
        if _local_source(url) is not None:
            sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    elif hash_prefix is not None:  # offline the cache is the download: check what the user put there
        _check_prefix(_sha256(cached_file), hash_prefix)
    return cached_file


def _load_verified(path, sha256, map_location, weights_only):
    name = os.path.basename(path)
    pins = _pins.get() or {}
    for expected in (sha256.lower() if sha256 is not None else None, pins.get(name)):
        if expected is not None:
            actual = _sha256(path)
            if actual != expected:
                raise RuntimeError(f"sha256 mismatch for {name}: expected {expected}, got {actual} ({path})")
    if name.endswith(".safetensors"):
        return _io.load_file(path, device="cpu" if map_location is None else map_location)
    return _kiln_load(path, map_location=map_location, weights_only=weights_only)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=True):
    """torch.hub.load_state_dict_from_url, offline: the object at ``url`` through <hub_dir>/checkpoints (or
    ``model_dir``), loaded with kiln.io.load_file (``.safetensors``) or kiln.load (weights_only=True by
    default: kiln runs no code from a weight file unless asked). ``check_hash``: the file name's
    ``-<hex>.`` part must prefix its SHA-256. Pinned by the running entry point's weights_sha256."""
    cached_file = _fetch(url, model_dir, file_name, check_hash, progress)
    return _load_verified(cached_file, None, map_location, weights_only)


def load_weights(path_or_url, sha256=None, map_location=None, weights_only=True, model_dir=None, file_name=None):
    """Loads a weight file: a local path (read in place) or a URL (through the checkpoints cache, as
    load_state_dict_from_url). ``sha256``: the file's full hex digest (else RuntimeError); the running entry
    point's weights_sha256 pins apply too. For a file shipped in a repository, from hubconf.py:
    ``hub.load_weights(os.path.join(os.path.dirname(__file__), "model.safetensors"))``."""
    src = os.fspath(path_or_url)
    if urlparse(src).scheme in ("http", "https", "ftp", "file"):
        src = _fetch(src, model_dir, file_name, False, False)
    return _load_verified(src, sha256, map_location, weights_only)
