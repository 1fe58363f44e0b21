"""Plug-ins are found through entry points; a name claimed twice is reported, never silently chosen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cfkit import registry
from cfkit.errors import PluginError


def _fake_distribution(site: Path, name: str, entry_points: str) -> None:
    """A minimal installed distribution: a .dist-info folder importlib.metadata reads."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def site(tmp_path: Path, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_built_ins_register_through_the_same_groups_as_plug_ins():
    assert {"openai", "diffusers", "classical", "file"} <= set(registry.plugins(registry.EDITORS))
    assert {"openai", "hf", "replay", "baseline"} <= set(registry.plugins(registry.BACKENDS))
    assert registry.plugins(registry.EDITORS)["classical"].value == "cfkit.editors.classical:ClassicalEditor"


def test_a_name_claimed_by_two_packages_is_reported_with_both(site):
    _fake_distribution(site, "rogue-editors", "[cfkit.editors]\nclassical = rogue_editors:Classical\n")
    with pytest.raises(PluginError) as info:
        registry.plugins(registry.EDITORS)
    message = str(info.value)
    assert "editor name 'classical' is registered twice" in message
    assert "rogue-editors (rogue_editors:Classical)" in message and "Uninstall one of them" in message


def test_the_same_target_registered_twice_is_one_plugin(site):
    _fake_distribution(site, "mirror", "[cfkit.backends]\nbaseline = cfkit.backends.baseline:BaselineBackend\n")
    assert registry.plugins(registry.BACKENDS)["baseline"].value == "cfkit.backends.baseline:BaselineBackend"


def test_an_unknown_name_lists_what_is_installed_and_where_to_look(site):
    _fake_distribution(site, "extra-backends", "[cfkit.backends]\nkeyword = extra_backends:Keyword\n")
    with pytest.raises(PluginError, match=r"Unknown backend 'sdxl'\. Installed: .*keyword.*See 'cfkit probe backends'"):
        registry.load(registry.BACKENDS, "sdxl")


def test_loading_a_name_imports_only_that_plugins_module():
    import subprocess

    code = ("import sys; from cfkit import registry; registry.load(registry.EDITORS, 'classical'); "
            "print(sorted(m for m in ('cfkit.editors.openai_images', 'cfkit.editors.diffusers_inpaint', 'torch', "
            "'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_plugin_that_does_not_subclass_gets_the_base_class_defaults(monkeypatch):
    """The worked example's classes subclass nothing of cfkit; loaded, they read like the built-ins."""
    import asyncio
    import sys

    from support.workspace import REPO
    from cfkit.backends import Backend, BackendContext
    from cfkit.editors import Editor
    from cfkit.registry import with_defaults

    monkeypatch.syspath_prepend(str(REPO / "examples" / "cfkit-plugin-example"))
    sys.modules.pop("cfkit_plugin_example", None)
    from cfkit_plugin_example import BlurEditor, KeywordBackend

    assert not issubclass(KeywordBackend, Backend) and not issubclass(BlurEditor, Editor)
    backend_cls = with_defaults(KeywordBackend, Backend)
    assert issubclass(backend_cls, KeywordBackend) and issubclass(backend_cls, Backend)
    assert with_defaults(KeywordBackend, Backend) is backend_cls  # one class per plug-in
    assert backend_cls.__name__ == "KeywordBackend" and backend_cls.kind == "keyword"  # its own members win
    backend = backend_cls("matcha", KeywordBackend.Options(words="green"), BackendContext())
    assert backend.model == "keyword:matcha" and backend.words == ["green"]
    assert (backend.notes, backend.endpoint, backend.versions, backend.options, backend.derived_identity) == (
        (), None, None, None, ())
    assert backend.batch_api() is None and asyncio.run(backend.aclose()) is None
    editor_cls = with_defaults(BlurEditor, Editor)
    editor = editor_cls(BlurEditor.Options(radius=3))
    assert editor_cls.max_candidates == 1 and editor_cls.auto_rank is None and editor.radius == 3
    assert editor.describe(None) == {} and editor.check(None) is None
    # A built-in subclasses the base itself and comes back unchanged.
    from cfkit.editors.classical import ClassicalEditor

    assert with_defaults(ClassicalEditor, Editor) is ClassicalEditor


def test_a_plug_in_names_the_distribution_that_registered_it_but_loading_reads_no_metadata(site, monkeypatch):
    """The listings show each plug-in's distribution by its own name; finding and loading a plug-in parses no
    distribution's metadata (every installed package's, tens of ms a command), only a listing that shows it."""
    import importlib.metadata

    _fake_distribution(site, "Extra-Backends", "[cfkit.backends]\nkeyword = cfkit.backends.baseline:BaselineBackend\n")
    parsed = []
    real = importlib.metadata.PathDistribution.metadata
    monkeypatch.setattr(importlib.metadata.PathDistribution, "metadata",
                        property(lambda self: parsed.append(self) or real.fget(self)))
    assert registry.load(registry.BACKENDS, "keyword").__name__ == "BaselineBackend"
    assert parsed == []
    assert registry.plugins(registry.BACKENDS)["keyword"].package == "Extra-Backends"
    assert parsed


def test_the_built_in_table_is_what_cfkit_s_own_entry_points_register():
    """registry.BUILT_IN (how a built-in name loads without reading every distribution's entry points) names
    exactly what pyproject.toml registers for cfkit, group by group."""
    import importlib.metadata

    own = importlib.metadata.distribution("cfkit-probes").entry_points
    for group in (registry.EDITORS, registry.BACKENDS):
        assert registry.BUILT_IN[group] == {ep.name: ep.value for ep in own if ep.group == group}, group


def test_a_built_in_name_loads_the_built_in_without_reading_entry_points(monkeypatch):
    import importlib.metadata

    def refused(**_kw):
        raise AssertionError("entry points read")

    monkeypatch.setattr(importlib.metadata, "entry_points", refused)
    registry._plugins.cache_clear()
    for group, table in registry.BUILT_IN.items():
        for name, target in table.items():
            found = registry.load(group, name)
            assert f"{found.__module__}:{found.__qualname__}" == target
    with pytest.raises(AssertionError, match="entry points read"):
        registry.load(registry.BACKENDS, "not-built-in")
    registry._plugins.cache_clear()


def test_a_package_claiming_a_built_in_name_never_replaces_it_and_the_listing_reports_it(site):
    _fake_distribution(site, "rogue-backends", "[cfkit.backends]\nopenai = cfkit.backends.baseline:BaselineBackend\n")
    assert registry.load(registry.BACKENDS, "openai").__name__ == "OpenAIBackend"
    with pytest.raises(PluginError, match=r"backend name 'openai' is registered twice: .*rogue-backends"):
        registry.plugins(registry.BACKENDS)


def test_a_plug_in_name_loads_its_dotted_target(site):
    _fake_distribution(site, "nested", "[cfkit.backends]\nnested = cfkit.backends:Backend.answer\n")
    from cfkit.backends import Backend

    assert registry.load(registry.BACKENDS, "nested") is Backend.answer


def test_installed_version_agrees_with_importlib_metadata_for_every_installed_distribution():
    import importlib.metadata

    names = {dist.metadata["Name"] for dist in importlib.metadata.distributions()}
    assert len(names) > 20
    for name in sorted(names):
        assert registry.installed_version(name) == importlib.metadata.version(name), name
        # Names compare normalised: case, and runs of '-', '_' and '.', as importlib.metadata compares them.
        assert registry.installed_version(name.upper().replace("-", "_")) == importlib.metadata.version(name), name
    assert registry.installed_version("no-such-distribution-here") is None


def test_installed_version_reads_a_new_distribution_and_the_first_on_the_path(site, tmp_path, monkeypatch):
    import importlib.metadata

    registry._distributions_in.cache_clear()
    _fake_distribution(site, "Odd.Name-Pkg", "")
    later = tmp_path / "later"
    later.mkdir()
    info = later / "odd_name_pkg-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd-name-pkg\nVersion: 2.0\n")
    monkeypatch.syspath_prepend(str(later))
    monkeypatch.syspath_prepend(str(site))  # site comes first on the path
    registry._distributions_in.cache_clear()
    assert registry.installed_version("odd-name.pkg") == importlib.metadata.version("odd-name.pkg") == "1.0"
    # A version line after the headers' end is not a header.
    (site / "Odd.Name_Pkg-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: Odd.Name-Pkg\nversion:  1.0.post3\n\nVersion: 9\n")
    assert registry.installed_version("Odd.Name-Pkg") == importlib.metadata.version("Odd.Name-Pkg") == "1.0.post3"
    registry._distributions_in.cache_clear()


@pytest.mark.parametrize("group", [registry.EDITORS, registry.BACKENDS])
def test_an_unknown_name_points_at_a_command_that_lists_every_installed_one(group):
    """The 'See ...' of an unknown engine or backend names a command that exists and lists the plug-ins."""
    from support.workspace import run_cli

    with pytest.raises(PluginError) as refused:
        registry.load(group, "no-such-plugin")
    pointer = str(refused.value).rsplit("See '", 1)[1].split("'", 1)[0]
    assert pointer.startswith("cfkit ")
    listed = run_cli(pointer.split()[1:])
    assert listed.exit_code == 0, listed.output
    for name in registry.BUILT_IN[group]:
        assert name in listed.output, (pointer, name)
