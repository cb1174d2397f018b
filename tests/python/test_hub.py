"""kiln.hub against torch.hub (torch 2.13) on the same cache layouts, offline.

torch.hub runs offline for a repository in its cache, for file:// URLs and for its trust check, so those
cases compare messages, results and trusted_list contents with torch's. Archives, http URLs from the cache,
the no-terminal case and weight pinning are kiln's own (torch would download or hang there)."""
import builtins
import contextlib
import hashlib
import io
import os
import pickle
import sys
import warnings
import zipfile

import pytest

import kiln
from kiln import hub

PLAIN_HUBCONF = '''
dependencies = ["os"]


def model(x=1, scale=2):
    """Doc of model."""
    return x * scale


def other():
    return "other"


def _private():
    return None
'''

KILN_HUBCONF = '''
import os
import kiln
from kiln import hub

dependencies = ["kiln"]
weights_sha256 = {PINS}


def linear(in_features, out_features, bias=True):
    """A kiln.nn.Linear."""
    return kiln.nn.Linear(in_features, out_features, bias=bias)


def pretrained(source, **kwargs):
    """A Linear(3, 2) with weights loaded through kiln.hub."""
    m = kiln.nn.Linear(3, 2)
    if "://" in source:
        sd = hub.load_state_dict_from_url(source, **kwargs)
    else:
        sd = hub.load_weights(os.path.join(os.path.dirname(__file__), source), **kwargs)
    m.load_state_dict(sd)
    return m
'''


@pytest.fixture
def hub_dir(tmp_path):
    old = hub._hub_dir
    d = tmp_path / "kiln_hub"
    d.mkdir()
    hub.set_dir(str(d))
    yield d
    hub._hub_dir = old


@pytest.fixture
def torch_hub():
    torch = pytest.importorskip("torch")
    old = torch.hub._hub_dir
    yield torch.hub
    torch.hub._hub_dir = old


def write_repo(folder, hubconf=PLAIN_HUBCONF, files=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hubconf.py").write_text(hubconf)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return folder


def write_zipball(path, top="owner-repo-0123abc", hubconf=PLAIN_HUBCONF, extra=()):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{top}/", "")
        zf.writestr(f"{top}/hubconf.py", hubconf)
        for name, data in extra:
            zf.writestr(name, data)
    return path


def trusted_list(d):
    p = d / "trusted_list"
    return p.read_text().split() if p.exists() else None


def answers(monkeypatch, *replies):
    """input() answering `replies` in turn; the prompts it was asked are returned."""
    asked, it = [], iter(replies)

    def fake_input(prompt=""):
        asked.append(prompt)
        return next(it)
    monkeypatch.setattr(builtins, "input", fake_input)
    return asked


def no_prompt(monkeypatch):
    def fake_input(prompt=""):
        raise AssertionError(f"unexpected prompt: {prompt}")
    monkeypatch.setattr(builtins, "input", fake_input)


def raised(fn, *args, **kwargs):
    with pytest.raises(BaseException) as info:
        fn(*args, **kwargs)
    return info.value


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def linear_state():
    kiln.manual_seed(0)
    return kiln.nn.Linear(3, 2).state_dict()


# ---- the cache directory ------------------------------------------------------------------------------------
def test_get_dir_follows_kiln_home_xdg_and_set_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.delenv("KILN_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert hub.get_dir() == os.path.expanduser("~/.cache/kiln/hub")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.get_dir() == str(tmp_path / "xdg" / "kiln" / "hub")
    monkeypatch.setenv("KILN_HOME", str(tmp_path / "home"))
    assert hub.get_dir() == str(tmp_path / "home" / "hub")
    hub.set_dir("~/somewhere")
    assert hub.get_dir() == os.path.expanduser("~/somewhere")
    assert kiln.hub is hub


# ---- local repositories ---------------------------------------------------------------------------------------
def test_local_load_builds_kiln_modules_and_restores_sys_path(hub_dir, tmp_path):
    repo = write_repo(tmp_path / "repo", KILN_HUBCONF.replace("{PINS}", "{}"))
    path_before = sys.path[:]
    m = hub.load(str(repo), "linear", 3, 4, source="local", bias=False)
    assert isinstance(m, kiln.nn.Linear)
    assert tuple(m.weight.shape) == (4, 3) and m.bias is None
    assert sys.path == path_before
    assert not os.listdir(hub_dir)  # local source: no trust check, nothing cached


def test_local_load_imports_sibling_modules_like_torch(tmp_path, torch_hub):
    hubconf = "import hub_sibling_kiln_t1 as s\n\ndef answer():\n    return s.VALUE\n"
    repo = write_repo(tmp_path / "repo", hubconf, {"hub_sibling_kiln_t1.py": "VALUE = 42\n"})
    assert hub.load(str(repo), "answer", source="LOCAL") == 42
    assert torch_hub.load(str(repo), "answer", source="local") == 42


def test_errors_match_torch(tmp_path, torch_hub):
    repo = write_repo(tmp_path / "repo")
    for call in (lambda h: h.load(str(repo), "model", source="gitlab"),
                 lambda h: h.load(str(repo), "missing", source="local"),
                 lambda h: h.load(str(repo), "_private_not_there", source="local"),
                 lambda h: h.load(str(repo), 3, source="local")):
        ours, theirs = raised(call, hub), raised(call, torch_hub)
        assert type(ours) is type(theirs) and str(ours) == str(theirs)
    assert str(raised(hub.load, str(repo), "model", source="gitlab")) == \
        'Unknown source: "gitlab". Allowed values: "github" | "local".'


def test_missing_dependencies_match_torch(tmp_path, torch_hub):
    repo = write_repo(tmp_path / "repo", PLAIN_HUBCONF.replace(
        '["os"]', '["os", "no_such_module_kiln_hub", "no_such_pkg_kiln_hub.sub"]'))
    ours = raised(hub.load, str(repo), "model", source="local")
    assert isinstance(ours, RuntimeError)
    assert str(ours) == "Missing dependencies: no_such_module_kiln_hub, no_such_pkg_kiln_hub.sub"
    # torch's find_spec raises for the dotted name whose parent is missing; kiln lists it as missing
    repo2 = write_repo(tmp_path / "repo2", PLAIN_HUBCONF.replace('["os"]', '["os", "no_such_module_kiln_hub"]'))
    ours, theirs = raised(hub.load, str(repo2), "model", source="local"), \
        raised(torch_hub.load, str(repo2), "model", source="local")
    assert type(ours) is type(theirs) is RuntimeError and str(ours) == str(theirs)


# ---- github repositories through the cache --------------------------------------------------------------------
@pytest.mark.parametrize("spec,folder", [("owner/repo", "owner_repo_main"), ("owner/repo:main", "owner_repo_main"),
                                         ("owner/repo", "owner_repo_master"),
                                         ("owner/repo:feature/x", "owner_repo_feature_x")])
def test_github_cache_matches_torch(hub_dir, tmp_path, torch_hub, monkeypatch, capsys, spec, folder):
    torch_dir = tmp_path / "torch_hub"
    for d in (hub_dir, torch_dir):
        write_repo(d / folder)
    torch_hub.set_dir(str(torch_dir))
    no_prompt(monkeypatch)
    for trust in ("check", True, None):
        assert hub.load(spec, "model", 5, trust_repo=trust, scale=3) == \
            torch_hub.load(spec, "model", 5, trust_repo=trust, scale=3) == 15
    assert hub.list(spec) == torch_hub.list(spec) == ["model", "other"]
    assert hub.help(spec, "model") == torch_hub.help(spec, "model") == "Doc of model."
    # a cached repository is trusted (torch's legacy rule): nothing was asked, nothing recorded
    assert trusted_list(hub_dir) == trusted_list(torch_dir) == []
    err = capsys.readouterr().err
    assert err.count(f"Using cache found in {hub_dir / folder}\n") == 5
    hub.load(spec, "model", verbose=False)
    assert capsys.readouterr().err == ""


def test_github_without_repo_or_network(hub_dir, tmp_path, torch_hub):
    torch_hub.set_dir(str(tmp_path / "torch_hub"))
    # torch: RuntimeError without a ref (it cannot ask GitHub for the default branch), URLError with one
    ours, theirs = raised(hub.load, "owner/repo", "model"), raised(torch_hub.load, "owner/repo", "model")
    assert isinstance(theirs, RuntimeError) and isinstance(ours, RuntimeError)
    ours, theirs = raised(hub.load, "owner/repo:v1", "model", trust_repo=True), \
        raised(torch_hub.load, "owner/repo:v1", "model", trust_repo=True, skip_validation=True)
    from urllib.error import URLError
    assert isinstance(theirs, URLError) and isinstance(ours, URLError) and isinstance(ours, hub.NoNetworkError)
    assert "no network access" in str(ours) and str(hub_dir / "owner_repo_v1") in str(ours)
    assert str(hub_dir / "v1.zip") in str(ours)
    # both recorded the trust before failing to fetch
    assert trusted_list(hub_dir) == trusted_list(tmp_path / "torch_hub") == ["owner_repo"]
    assert isinstance(raised(hub.load, "owner-repo", "model"), ValueError)


def test_zipball_is_extracted_like_torch(hub_dir, monkeypatch):
    write_zipball(hub_dir / "main.zip", extra=[("owner-repo-0123abc/pkg_kiln_hub_zip.py", "X = 7\n")])
    no_prompt(monkeypatch)
    assert hub.load("owner/repo", "model", 4, trust_repo=True) == 8
    repo = hub_dir / "owner_repo_main"
    assert sorted(os.listdir(repo)) == ["hubconf.py", "pkg_kiln_hub_zip.py"]
    assert sorted(os.listdir(hub_dir)) == ["owner_repo_main", "trusted_list"]
    assert not (hub_dir / "main.zip").exists()  # torch removes the archive once extracted
    assert trusted_list(hub_dir) == ["owner_repo"]
    assert hub.list("owner/repo:main") == ["model", "other"]


def test_force_reload_reads_a_new_zipball_or_raises(hub_dir):
    write_repo(hub_dir / "owner_repo_v2", PLAIN_HUBCONF.replace("x * scale", "-1"))
    assert hub.load("owner/repo:v2", "model", 3) == -1
    err = raised(hub.load, "owner/repo:v2", "model", 3, force_reload=True)
    assert isinstance(err, hub.NoNetworkError) and "force_reload=True" in str(err)
    assert (hub_dir / "owner_repo_v2").exists()  # nothing was removed
    write_zipball(hub_dir / "v2.zip")
    assert hub.load("owner/repo:v2", "model", 3, force_reload=True) == 6
    assert hub.load("owner/repo:v2", "model", 3) == 6


def test_zipball_entries_may_not_escape(hub_dir, tmp_path):
    write_zipball(hub_dir / "main.zip", extra=[("../evil_kiln_hub.py", "boom")])
    err = raised(hub.load, "owner/repo:main", "model", trust_repo=True)
    assert isinstance(err, ValueError) and "evil_kiln_hub" in str(err)
    assert not (tmp_path / "evil_kiln_hub.py").exists() and not (hub_dir / "owner_repo_main").exists()
    with zipfile.ZipFile(hub_dir / "main.zip", "w") as zf:
        zf.writestr("a/hubconf.py", PLAIN_HUBCONF)
        zf.writestr("b/hubconf.py", PLAIN_HUBCONF)
    assert "single top-level folder" in str(raised(hub.load, "owner/repo:main", "model", trust_repo=True))


# ---- trust --------------------------------------------------------------------------------------------------
def torch_trust(torch_hub, torch_dir, trust_repo, monkeypatch, *replies):
    """torch's own trust check on the same state (no repository folder), with scripted answers."""
    torch_dir.mkdir(exist_ok=True)
    torch_hub.set_dir(str(torch_dir))
    asked = answers(monkeypatch, *replies)
    try:
        torch_hub._check_repo_is_trusted("owner", "repo", "owner_repo_main", trust_repo=trust_repo)
        err = None
    except BaseException as e:  # noqa: B036 (compared below)
        err = e
    return asked, err, trusted_list(torch_dir)


@pytest.mark.parametrize("trust,replies,loads,recorded", [
    (None, (), True, ["owner_repo"]),      # torch 2.13: None trusts (no warning, no prompt) and records
    (True, (), True, ["owner_repo"]),
    ("check", ("y",), True, ["owner_repo"]),
    ("check", ("YES",), True, ["owner_repo"]),
    ("check", ("n",), False, []),
    ("check", ("",), False, []),
    (False, ("y",), True, ["owner_repo"]),
    (False, ("no",), False, []),
    (False, ("maybe",), False, []),
])
def test_trust_of_an_archive_matches_torch(hub_dir, tmp_path, torch_hub, monkeypatch, trust, replies,
                                           loads, recorded):
    t_asked, t_err, t_list = torch_trust(torch_hub, tmp_path / "torch_hub", trust, monkeypatch, *replies)
    write_zipball(hub_dir / "main.zip")
    asked = answers(monkeypatch, *replies)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if loads:
            assert hub.load("owner/repo:main", "model", 2, trust_repo=trust) == 4
            assert t_err is None
        else:
            err = raised(hub.load, "owner/repo:main", "model", 2, trust_repo=trust)
            assert type(err) is type(t_err) and str(err) == str(t_err)
            assert (hub_dir / "main.zip").exists() and not (hub_dir / "owner_repo_main").exists()
    assert asked == t_asked and len(asked) == len(replies)
    assert trusted_list(hub_dir) == t_list == recorded


def test_trust_prompt_text_and_already_trusted(hub_dir, tmp_path, torch_hub, monkeypatch, capsys):
    write_repo(hub_dir / "owner_repo_main")
    (tmp_path / "torch_hub" / "owner_repo_main").mkdir(parents=True)
    t_asked, t_err, t_list = torch_trust(torch_hub, tmp_path / "torch_hub", False, monkeypatch, "y")
    t_out = capsys.readouterr().out
    asked = answers(monkeypatch, "y")
    assert hub.load("owner/repo", "model", trust_repo=False) == 2
    assert asked == t_asked and "(y/N)?" in asked[0] and "owner_repo" in asked[0]
    assert capsys.readouterr().out == t_out == "The repository is already trusted.\n"
    assert trusted_list(hub_dir) == t_list == [] and t_err is None


def test_check_skips_the_prompt_for_listed_repos_and_trusted_owners(hub_dir, monkeypatch):
    (hub_dir / "trusted_list").write_text("someone_else\nowner_repo\n")
    write_zipball(hub_dir / "main.zip")
    no_prompt(monkeypatch)
    assert hub.load("owner/repo:main", "model", 1) == 2
    write_zipball(hub_dir / "main.zip")
    assert hub.list("kiln/models:main", trust_repo="check") == ["model", "other"]
    assert trusted_list(hub_dir) == ["someone_else", "owner_repo"]  # a trusted owner is not recorded


@pytest.mark.parametrize("exc", [EOFError, OSError])
def test_no_terminal_raises_instead_of_hanging(hub_dir, monkeypatch, exc):
    write_zipball(hub_dir / "main.zip")

    def closed(prompt=""):
        raise exc("stdin is closed")
    monkeypatch.setattr(builtins, "input", closed)
    for trust in ("check", False):
        err = raised(hub.load, "owner/repo:main", "model", trust_repo=trust)
        assert type(err) is RuntimeError and "trust_repo=True" in str(err) and "owner_repo" in str(err)
    assert trusted_list(hub_dir) == [] and (hub_dir / "main.zip").exists()
    assert hub.load("owner/repo:main", "model", trust_repo=True) == 2


# ---- downloads --------------------------------------------------------------------------------------------
def test_download_url_to_file_matches_torch(tmp_path, torch_hub):
    src = tmp_path / "blob.bin"
    src.write_bytes(os.urandom(300_000))
    digest = sha(src)
    url = src.as_uri()
    for h, dst in ((hub, tmp_path / "ours"), (torch_hub, tmp_path / "theirs")):
        h.download_url_to_file(url, str(dst), hash_prefix=digest[:10], progress=False)
        assert dst.read_bytes() == src.read_bytes()
    ours = raised(hub.download_url_to_file, url, str(tmp_path / "o2"), hash_prefix="0000", progress=False)
    theirs = raised(torch_hub.download_url_to_file, url, str(tmp_path / "t2"), hash_prefix="0000", progress=False)
    assert type(ours) is type(theirs) is RuntimeError and str(ours) == str(theirs)
    assert str(ours) == f'invalid hash value (expected "0000", got "{digest}")'
    assert sorted(os.listdir(tmp_path)) == ["blob.bin", "ours", "theirs"]  # no partial files left behind
    # kiln also takes a plain path (torch: ValueError, unknown url type)
    hub.download_url_to_file(str(src), str(tmp_path / "plain"))
    assert (tmp_path / "plain").read_bytes() == src.read_bytes()


def test_download_of_an_http_url_raises_no_network(tmp_path):
    from urllib.error import URLError
    err = raised(hub.download_url_to_file, "https://example.com/w.pt", str(tmp_path / "w.pt"))
    assert isinstance(err, URLError) and "no network access" in str(err) and str(tmp_path / "w.pt") in str(err)
    assert os.listdir(tmp_path) == []


def test_load_state_dict_from_file_url_matches_torch(hub_dir, tmp_path, torch_hub, capsys):
    sd = linear_state()
    src = tmp_path / f"lin-{'0' * 8}.pt"
    kiln.save(sd, str(src))
    good = tmp_path / f"lin-{sha(src)[:12]}.pt"
    src.rename(good)
    ours = hub.load_state_dict_from_url(good.as_uri(), check_hash=True, progress=False)
    assert set(ours) == {"weight", "bias"} and kiln.equal(ours["weight"], sd["weight"])
    assert (hub_dir / "checkpoints" / good.name).read_bytes() == good.read_bytes()
    assert f'Downloading: "{good.as_uri()}" to {hub_dir / "checkpoints" / good.name}' in capsys.readouterr().out
    torch_hub.set_dir(str(tmp_path / "torch_hub"))
    theirs = torch_hub.load_state_dict_from_url(good.as_uri(), check_hash=True, progress=False, weights_only=True)
    assert theirs["weight"].tolist() == ours["weight"].tolist()
    # a file whose name carries a wrong hash prefix: the same error as torch's
    bad = tmp_path / "lin-abcdef12.pt"
    bad.write_bytes(good.read_bytes())
    ours = raised(hub.load_state_dict_from_url, bad.as_uri(), check_hash=True)
    theirs = raised(torch_hub.load_state_dict_from_url, bad.as_uri(), check_hash=True)
    assert type(ours) is type(theirs) is RuntimeError and str(ours) == str(theirs)
    assert not (hub_dir / "checkpoints" / bad.name).exists()


def test_http_url_loads_from_the_cache_only(hub_dir, tmp_path):
    url = "https://example.com/models/lin-{}.safetensors"
    err = raised(hub.load_state_dict_from_url, url.format("x"))
    cached = hub_dir / "checkpoints" / "lin-x.safetensors"
    assert isinstance(err, hub.NoNetworkError) and str(cached) in str(err)
    kiln.save_file(linear_state(), str(cached))
    sd = hub.load_state_dict_from_url(url.format("x"))
    assert kiln.equal(sd["weight"], linear_state()["weight"])
    # check_hash also checks a file put in the cache by hand (torch trusts its cache)
    kiln.save_file(linear_state(), str(hub_dir / "checkpoints" / "lin-deadbeef.safetensors"))
    err = raised(hub.load_state_dict_from_url, url.format("deadbeef"), check_hash=True)
    assert type(err) is RuntimeError and 'invalid hash value (expected "deadbeef"' in str(err)
    # model_dir and file_name as torch
    other = tmp_path / "elsewhere"
    src = tmp_path / "w.safetensors"
    kiln.save_file(linear_state(), str(src))
    sd = hub.load_state_dict_from_url(str(src), model_dir=str(other), file_name="renamed.safetensors")
    assert os.listdir(other) == ["renamed.safetensors"] and kiln.equal(sd["bias"], linear_state()["bias"])


class _RunsCode:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_weights_only_refuses_code(hub_dir, tmp_path, torch_hub):
    marker = tmp_path / "code_ran"
    src = tmp_path / "evil.pt"
    kiln.save({"weight": kiln.ones(2), "payload": _RunsCode(str(marker))}, str(src))
    err = raised(hub.load_state_dict_from_url, str(src))
    assert isinstance(err, pickle.UnpicklingError) and "mkdir" in str(err)
    assert not marker.exists()
    torch_hub.set_dir(str(tmp_path / "torch_hub"))
    assert isinstance(raised(torch_hub.load_state_dict_from_url, src.as_uri(), weights_only=True),
                      pickle.UnpicklingError)
    assert not marker.exists()
    # weights_only=False is the caller's choice, as torch: the pickle runs
    out = hub.load_state_dict_from_url(str(src), weights_only=False)
    assert marker.is_dir() and out["weight"].tolist() == [1.0, 1.0]


# ---- weights pinned by a repository ---------------------------------------------------------------------------
def pinned_repo(tmp_path, pins):
    repo = write_repo(tmp_path / "repo", KILN_HUBCONF.replace("{PINS}", repr(pins)))
    kiln.save_file(linear_state(), str(repo / "lin.safetensors"))
    kiln.save(linear_state(), str(repo / "lin.pt"))
    return repo


def test_pinned_weights_load_when_digests_match(hub_dir, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    kiln.save_file(linear_state(), str(repo / "lin.safetensors"))
    kiln.save(linear_state(), str(repo / "lin.pt"))
    pins = {"lin.safetensors": sha(repo / "lin.safetensors").upper(), "lin.pt": sha(repo / "lin.pt")}
    (repo / "hubconf.py").write_text(KILN_HUBCONF.replace("{PINS}", repr(pins)))
    for source in ("lin.safetensors", "lin.pt", (repo / "lin.pt").as_uri()):
        m = hub.load(str(repo), "pretrained", source, source="local")
        assert kiln.equal(m.weight, linear_state()["weight"])


def test_pinned_weights_refuse_other_bytes(hub_dir, tmp_path):
    repo = pinned_repo(tmp_path, {"lin.safetensors": "ab" * 32, "lin.pt": "cd" * 32})
    for source, pinned in (("lin.safetensors", "ab" * 32), ((repo / "lin.pt").as_uri(), "cd" * 32)):
        err = raised(hub.load, str(repo), "pretrained", source, source="local")
        name = os.path.basename(source)
        actual = sha(repo / name)
        assert type(err) is RuntimeError
        assert f"sha256 mismatch for {name}: expected {pinned}, got {actual}" in str(err)
    # the pins hold only while the repository's entry point runs
    assert kiln.equal(hub.load_weights(str(repo / "lin.safetensors"))["weight"], linear_state()["weight"])
    # and a github repository's pins too
    write_repo(hub_dir / "owner_repo_main", KILN_HUBCONF.replace("{PINS}", repr({"lin.pt": "00" * 32})))
    kiln.save(linear_state(), str(hub_dir / "owner_repo_main" / "lin.pt"))
    assert "sha256 mismatch for lin.pt" in str(raised(hub.load, "owner/repo", "pretrained", "lin.pt"))


def test_load_weights_explicit_digest_and_bad_pins(hub_dir, tmp_path):
    path = tmp_path / "w.pt"
    kiln.save(linear_state(), str(path))
    assert set(hub.load_weights(str(path), sha256=sha(path))) == {"weight", "bias"}
    err = raised(hub.load_weights, str(path), sha256="1" * 64)
    assert type(err) is RuntimeError and "w.pt" in str(err) and sha(path) in str(err) and "1" * 64 in str(err)
    assert set(hub.load_weights(path.as_uri())) == {"weight", "bias"}  # copied to the checkpoints cache
    assert (hub_dir / "checkpoints" / "w.pt").exists()
    repo = write_repo(tmp_path / "repo", KILN_HUBCONF.replace("{PINS}", "['not', 'a', 'dict']"))
    assert isinstance(raised(hub.load, str(repo), "linear", 1, 1, source="local"), TypeError)


def test_safetensors_and_kiln_save_formats_load_alike(hub_dir, tmp_path):
    sd = linear_state()
    kiln.save_file(sd, str(tmp_path / "a.safetensors"))
    kiln.save(sd, str(tmp_path / "a.pt"))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        a = hub.load_state_dict_from_url((tmp_path / "a.safetensors").as_uri())
        b = hub.load_state_dict_from_url((tmp_path / "a.pt").as_uri())
    assert a.keys() == b.keys() == sd.keys()
    assert all(kiln.equal(a[k], b[k]) and kiln.equal(a[k], sd[k]) for k in sd)
    assert buf.getvalue().count("Downloading:") == 2
